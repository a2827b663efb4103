"""Pixel environments: the preprocessing, MovingDot's rules, Atari through ale-py and state
round trips."""

import numpy as np
import pytest

from prefrl.envs import UnknownEnvError, make_env, make_pixel_env
from prefrl.envs.frames import area_matrix
from prefrl.envs.movingdot import CENTRE, DOT, HEIGHT, WIDTH


def test_area_matrix_averages_intervals():
    m = area_matrix(210, 84)
    np.testing.assert_allclose(m.sum(1), 1.0, rtol=1e-6)
    # 210 -> 84 is 2.5 source pixels per output pixel: the first takes pixels 0, 1 and half of 2.
    np.testing.assert_allclose(m[0, :3], [0.4, 0.4, 0.2], rtol=1e-6)
    assert m[0, 3:].sum() == 0
    ramp = np.arange(210, dtype=np.float32)
    np.testing.assert_allclose((m @ ramp)[0], (0 + 1 + 0.5 * 2) / 2.5, rtol=1e-6)


def test_movingdot_rewards_and_time_limit():
    env = make_pixel_env("movingdot", seed=0)
    obs = env.reset()
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8 and obs.max() == 255
    env.game.pos = np.array([10, 105])  # left of the centre, on its row
    assert env.step(2)[1] == 4.0  # right, 4 frames, each nearer
    assert env.step(4)[1] == -4.0  # left: each frame farther
    assert env.step(0)[1] == 0.0
    env.game.pos = np.array([0, 0])
    env.step(3)  # up, into the wall: the dot stays on the screen
    assert env.game.pos.tolist() == [0, 0]
    env.game.pos = np.array([WIDTH - DOT, HEIGHT - DOT])
    env.step(2)
    assert env.game.pos.tolist() == [WIDTH - DOT, HEIGHT - DOT]
    env.reset()
    ends = [env.step(0)[2:] for _ in range(250)]
    assert ends[-1] == (False, True) and not any(any(e) for e in ends[:-1])  # a time limit
    assert np.abs(env.game.pos - CENTRE).max() < 200


def test_movingdot_frame_shows_the_dot():
    env = make_pixel_env("movingdot", seed=0)
    env.reset()
    env.game.pos = np.array([80, 105])
    obs = env.step(0)[0]
    frame = obs[..., -1]
    y, x = np.unravel_index(np.argmax(frame), frame.shape)
    assert abs(y - 105 * 84 / 210) <= 2 and abs(x - 80 * 84 / 160) <= 2
    assert env.render().shape == (210, 160, 3)


@pytest.mark.parametrize("env_id", ["movingdot", "atari:Pong"])
def test_state_round_trip_replays_exactly(env_id):
    env = make_pixel_env(env_id, seed=3)
    env.reset()
    for _ in range(20):
        env.step(1)
    state = env.get_state()
    actions = np.random.default_rng(0).integers(0, env.n_actions, 60)
    first = [env.step(a) for a in actions]
    frames_first = env.render().copy()
    other = make_pixel_env(env_id, seed=99)  # a fresh env, another seed
    other.reset()
    obs = other.set_state(state)
    assert np.array_equal(obs[..., -1], first[0][0][..., -2])  # the newest frame before the step
    second = [other.step(a) for a in actions]
    assert [s[1] for s in second] == [f[1] for f in first]
    for a, b in zip(first[3:], second[3:], strict=True):  # the stack has refilled
        assert np.array_equal(a[0], b[0])
    assert np.array_equal(other.render(), frames_first)


def test_atari_preprocessing_and_blanked_score():
    env = make_pixel_env("atari:Pong", seed=0)
    obs = env.reset()
    assert obs.shape == (84, 84, 4) and env.n_actions == 6
    for _ in range(30):  # (each stack: the last one's newest 3 frames, then the new one)
        before, obs = obs, env.step(0)[0]
        assert obs.dtype == np.uint8 and np.array_equal(obs[..., :3], before[..., 1:])
    assert np.array_equal(obs[..., 3], env.step(0)[0][..., 2])
    assert obs[:9].max() == 0  # the score rows
    assert obs[20:].max() > 0
    assert env.fps == 15.0
    enduro = make_pixel_env("atari:Enduro", seed=0)
    assert enduro.max_episode_steps == 750  # before the weather changes


def test_bad_pixel_env_ids():
    with pytest.raises(ValueError, match=r"atari:Pongg is not an Atari game.*atari:Pong"):
        make_pixel_env("atari:Pongg")
    with pytest.raises(UnknownEnvError, match="prefrl frames.*do not take frames"):
        make_env("atari:Pong")
    with pytest.raises(UnknownEnvError, match="not a pixel env"):
        make_pixel_env("Hopper-v5")
