import numpy as np
import pytest

from prefrl.envs import UnknownEnvError, can_disable_early_termination, known_env_ids, make_env
from prefrl.envs.backends import FAST_RENDER_OFF

STATEFUL = [
    "toy:point-reach",
    "toy:maze-medium",
    "sparse:pusher",
    "Hopper-v5",
    "HalfCheetah-v5",
    "Pendulum-v1",
    "dmc:walker-walk",
]


@pytest.mark.parametrize(
    "env_id", STATEFUL + ["Walker2d-v5", "Reacher-v5", "dmc:cheetah-run", "dmc:quadruped-walk"]
)
def test_flat_float32_observations_and_unit_actions(env_id):
    env = make_env(env_id, seed=0)
    obs, _ = env.reset()
    assert obs.dtype == np.float32 and obs.ndim == 1
    assert obs.shape == env.observation_space.shape
    assert np.all(env.action_space.low == -1.0) and np.all(env.action_space.high == 1.0)
    obs, reward, *_ = env.step(env.action_space.sample())
    assert obs.dtype == np.float32 and isinstance(reward, float)
    env.close()


@pytest.mark.parametrize("env_id", STATEFUL)
def test_stepping_from_a_restored_state_reproduces_observations(env_id):
    env = make_env(env_id, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(10):
        env.step(rng.uniform(-1, 1, env.action_dim))
    state = env.get_state()
    actions = rng.uniform(-1, 1, (25, env.action_dim))
    first = [env.step(a)[:2] for a in actions]
    # Move far away (a new episode), then restore.
    env.reset(seed=99)
    restored_obs = env.set_state(state)
    assert restored_obs.dtype == np.float32 and restored_obs.shape == env.observation_space.shape
    second = [env.step(a)[:2] for a in actions]
    for (o1, r1), (o2, r2) in zip(first, second):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2
    env.close()


def test_set_state_rejects_a_state_of_the_wrong_size():
    env = make_env("Hopper-v5")
    env.reset()
    with pytest.raises(ValueError, match="state has 3 values"):
        env.set_state(np.zeros(3))


def test_actions_are_rescaled_to_the_env_bounds():
    env = make_env("Pendulum-v1", seed=0)  # torque bounds are [-2, 2]
    env.reset()
    env.step(np.array([1.0]))
    assert env.unwrapped.last_u == pytest.approx(2.0)
    env.step(np.array([-0.5]))
    assert env.unwrapped.last_u == pytest.approx(-1.0)


def test_same_seed_same_episode():
    a, b = make_env("Hopper-v5", seed=7), make_env("Hopper-v5", seed=7)
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    assert not np.array_equal(make_env("Hopper-v5", seed=8).reset()[0], a.reset(seed=7)[0] + 1)


@pytest.mark.parametrize(
    "env_id", ["Hopper-v5", "dmc:cheetah-run", "toy:point-reach", "Pendulum-v1"]
)
def test_offscreen_rendering_at_a_chosen_size(env_id):
    from prefrl.envs import RenderSettings

    env = make_env(env_id, seed=0, render=RenderSettings(width=96, height=64))
    env.reset()
    frame = env.render()
    assert frame.shape == (64, 96, 3) and frame.dtype == np.uint8
    assert frame.std() > 0  # not a blank image
    env.close()


@pytest.mark.parametrize("env_id", ["Hopper-v5", "dmc:walker-walk"])
def test_fast_quality_leaves_out_the_skybox_and_shadows(env_id):
    from prefrl.envs import RenderSettings

    corners = {}
    for fast in (True, False):
        env = make_env(env_id, seed=0, render=RenderSettings(width=64, height=64, fast=fast))
        env.reset(seed=0)
        corners[fast] = env.render()[:6, :6]  # sky
        env.close()
    assert corners[True].max() == 0 and corners[False].max() > 30  # no skybox when fast
    fast_env = make_env(env_id, seed=0, render=RenderSettings(width=64, height=64))
    fast_env.reset(seed=0)
    fast_env.render()
    backend = fast_env.backend
    off = (
        [backend._renderer.scene.flags[f] for f in FAST_RENDER_OFF]
        if hasattr(backend, "_renderer")
        else [backend.flags[f] for f in FAST_RENDER_OFF]
    )
    assert not any(off)  # shadows, reflections, skybox and haze all off
    fast_env.close()


def test_render_without_render_flag_is_a_clear_error():
    env = make_env("toy:point-reach")
    env.reset()
    with pytest.raises(RuntimeError, match="render=True"):
        env.render()


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("Hoper-v5", "Hopper-v5"),
        ("dmc:walker-wlk", "dmc:walker-walk"),
        ("toy:point-rech", "toy:point-reach"),
    ],
)
def test_unknown_id_lists_families_and_closest_matches(bad, expected):
    with pytest.raises(UnknownEnvError) as info:
        make_env(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert "Closest matches" in message and expected in message
    if ":" in bad:  # (a known family: that one is described, not all of them)
        family = bad.split(":")[0]
        assert f"no such {family} task). {family}: " in message and "Known families" not in message
    else:
        assert "Known families" in message and "dmc:" in message and "toy:" in message


def test_unknown_family_and_unsupported_gym_env():
    with pytest.raises(UnknownEnvError, match="no family 'foo'"):
        make_env("foo:bar")
    with pytest.raises(UnknownEnvError) as info:
        make_env("CartPole-v1")  # discrete actions: said so, with what prefrl takes instead
    message = str(info.value)
    assert message.startswith("'CartPole-v1' has Discrete(2) actions; prefrl's agents need "
                              "continuous actions (a Box space), as in Hopper-v5")  # fmt: skip
    assert "Known families" not in message and len(message) < 250


def _steps_until_done(env, action):
    env.reset(seed=0)
    for n in range(1, 10_000):
        _, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return n, terminated, reward


def test_early_termination_can_be_turned_off_where_the_env_has_a_switch():
    push = np.ones(3, np.float32)  # full torque on every joint: the hopper falls at once
    n, terminated, _ = _steps_until_done(make_env("Hopper-v5"), push)
    assert terminated and n < 100
    n, terminated, last_reward = _steps_until_done(
        make_env("Hopper-v5", early_termination=False), push
    )
    assert not terminated and n == 1000  # on to the time limit
    assert last_reward < 0  # fallen: no alive bonus, only the control cost
    assert can_disable_early_termination("Walker2d-v5")
    for env_id in ("HalfCheetah-v5", "dmc:walker-walk", "toy:point-reach", "InvertedPendulum-v5"):
        assert not can_disable_early_termination(env_id)
    with pytest.raises(ValueError, match="HalfCheetah-v5 has no switch for early termination"):
        make_env("HalfCheetah-v5", early_termination=False)


def test_known_ids_cover_each_family():
    ids = known_env_ids()
    for env_id in [
        "Hopper-v5",
        "Pendulum-v1",
        "dmc:walker-walk",
        "dmc:quadruped-walk",
        "toy:point-reach",
    ]:
        assert env_id in ids
    assert "CartPole-v1" not in ids
    with pytest.raises(ValueError, match="unknown family"):
        known_env_ids("atari")


def test_video_camera_follows_a_robot_that_runs_away():
    """A free camera (Gymnasium's rgb_array default) would show only floor once the cheetah has
    moved on; prefrl's tracking camera keeps it in the frame."""
    from prefrl.envs import RenderSettings

    env = make_env("HalfCheetah-v5", seed=0, render=RenderSettings(width=128, height=128))
    env.reset()

    def robot_pixels(frame):
        r, g, b = (frame[..., i].astype(int) for i in range(3))
        return int(((r > g + 40) & (r > b + 40)).sum())  # the cheetah's orange body

    at_start = robot_pixels(env.render())
    data = env.unwrapped.data
    data.qpos[0] += 20.0  # rootx: 20 m down the track
    env.set_state(env.get_state())
    far_away = robot_pixels(env.render())
    assert at_start > 100 and far_away > 0.5 * at_start
    env.close()


def test_a_users_registered_gymnasium_envs_work_by_id():
    """`module:EnvId` imports the module that registers the env (in every process prefrl
    starts); a MuJoCo one saves and restores its state exactly, any other runs without."""
    from prefrl.envs.backends import StateNotRestorable

    plain = make_env("tests.user_envs:Slider-v0", seed=0, render=True)
    assert (plain.obs_dim, plain.action_dim, plain.max_episode_steps) == (2, 1, 50)
    obs, _ = plain.reset(seed=0)
    nxt = plain.step(np.ones(1, np.float32))[0]
    np.testing.assert_allclose(nxt[0] - obs[0], 0.2, rtol=1e-5)  # +1 -> the env's bound, 2
    assert plain.render().shape == (32, 64, 3)
    assert not plain.restores_state and plain.get_state().shape == (0,)
    with pytest.raises(StateNotRestorable, match="Slider-v0 cannot restore a saved state"):
        plain.set_state(plain.get_state())
    plain.close()

    ball = make_env("tests.user_envs:RollingBall-v0", seed=0, render=True)
    assert ball.restores_state
    ball.reset(seed=1)
    state = ball.get_state()
    actions = np.random.default_rng(0).uniform(-1, 1, (5, 1)).astype(np.float32)
    first = [ball.step(a)[0] for a in actions]
    ball.set_state(state)
    again = [ball.step(a)[0] for a in actions]
    np.testing.assert_array_equal(np.stack(first), np.stack(again))
    assert ball.render().shape == (256, 256, 3)
    ball.close()
    with pytest.raises(UnknownEnvError, match="its module cannot be imported"):
        make_env("tests.no_such_module:Slider-v0")


def test_the_maze_rewards_only_a_clean_arrival_and_its_scripted_path_gets_there():
    from prefrl.envs.maze import PointMaze, scripted_action, shortest_path

    for layout in ("u", "open", "medium"):
        env = make_env("toy:maze" if layout == "u" else f"toy:maze-{layout}", seed=0)
        maze = env.unwrapped
        env.reset(seed=1)
        waypoints, index, rewards = [maze.centre(c) for c in shortest_path(maze)], 0, []
        for _ in range(env.max_episode_steps):
            action, index = scripted_action(maze, waypoints, index)
            _, reward, terminated, truncated, info = env.step(action)
            rewards.append(reward)
            assert not terminated and reward == float(info["success"])
        assert truncated and rewards[-1] == 1.0 and 0 < rewards.index(1.0) < len(rewards) - 20
        env.close()
    # Into the wall above the start cell: stopped there, and success is gone for the episode.
    maze = PointMaze("u")
    maze.reset(seed=0)
    for _ in range(30):
        maze.step(np.array([0.0, 1.0]))
    assert maze.observe()[6] == 1.0 and np.all(maze.observe()[2:4] == 0)
    state = maze.get_state()
    state[0:2] = maze.centre(maze.goal_cell)  # even placed on the goal
    maze.set_state(state)
    assert maze.step(np.zeros(2))[1] == 0.0
    with pytest.raises(ValueError, match="maze layout 'x' is unknown; known: u, open, medium"):
        PointMaze("x")


def test_a_users_env_module_is_found_in_the_directory_prefrl_runs_in(tmp_path):
    """The `prefrl` script, unlike `python -m`, has no working directory on sys.path (-I here
    does the same): `--env my_envs:Slider-v0` must still find my_envs.py where the user is."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copy(Path(__file__).parent / "user_envs.py", tmp_path / "my_envs.py")
    code = ("from prefrl.envs import make_env; e = make_env('my_envs:Slider-v0'); "
            "print(e.env_id, e.obs_dim)")  # fmt: skip
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.split() == ["my_envs:Slider-v0", "2"]
    with pytest.raises(UnknownEnvError, match="nor a module of that name to import"):
        make_env("no_such_module_here:Slider-v0")


@pytest.mark.parametrize("task", ["door", "pen", "hammer", "relocate"])
def test_adroit_tasks_have_a_sparse_success_and_states_that_replay_exactly(task):
    """The randomised scene (door position, pen target, board, ball and target) is part of the
    state: a state taken in one episode replays bit for bit after a reset to another."""
    env = make_env(f"adroit:{task}", seed=0)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        env.step(rng.uniform(-1, 1, env.action_dim))
    state, actions = env.get_state(), rng.uniform(-1, 1, (20, env.action_dim))
    first = [env.step(a) for a in actions]
    states = [env.get_state()]
    env.reset(seed=99)  # another randomised scene
    env.set_state(state)
    second = [env.step(a) for a in actions]
    for (o1, r1, t1, _, i1), (o2, r2, t2, _, i2) in zip(first, second, strict=True):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2 == float(i1["success"]) and r1 in (0.0, 1.0) and not (t1 or t2)
    # A restored state observes what the step into it observed (an episode started from a demo
    # state sees its first observation made like the rest)
    env.reset(seed=99)
    np.testing.assert_allclose(env.set_state(states[0]), first[-1][0], atol=1e-6)
    env.close()


@pytest.mark.parametrize("task, steps", [("door", 200), ("pen", 100)])
def test_adroit_episodes_last_as_long_as_the_rfcl_paper_s(task, steps):
    """The pen runs 100 steps (gymnasium-robotics registers 200): success is judged at the end."""
    env = make_env(f"adroit:{task}", seed=0)
    assert env.max_episode_steps == steps
    env.reset(seed=0)
    truncated = [env.step(np.zeros(env.action_dim))[3] for _ in range(steps)]
    assert truncated == [False] * (steps - 1) + [True]
    env.close()


def test_sparse_pusher_succeeds_with_the_object_at_the_goal():
    env = make_env("sparse:pusher", seed=0)
    env.reset(seed=0)
    assert env.step(np.zeros(7))[1] == 0.0
    base = env.unwrapped
    qpos, qvel = base.data.qpos.copy(), base.data.qvel.copy()
    qpos[-4:-2] = qpos[-2:]  # the object's slide joints onto the goal's
    base.set_state(qpos, qvel * 0)
    _, reward, terminated, _, info = env.step(np.zeros(7))
    assert reward == 1.0 and info["success"] and not terminated
    env.close()
