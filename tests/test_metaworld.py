"""MetaWorld's tasks as `metaworld:<task>` (metaworld 3.1.1 on prefrl's MuJoCo, welds padded):
exact state restore, seeded placements, refusals, scripted demos, frames."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from prefrl.envs import RenderSettings, UnknownEnvError, make_env

pytest.importorskip("metaworld", reason="metaworld is not installed (make test installs it)")


def _episode(env, actions):
    observations, rewards, successes = [], [], []
    for action in actions:
        obs, reward, terminated, _, info = env.step(action)
        assert not terminated
        observations.append(obs)
        rewards.append(reward)
        successes.append(info["success"])
    return np.array(observations), np.array(rewards), np.array(successes)


@pytest.mark.parametrize("task", ["stick-push", "pick-place-wall"])
def test_a_state_restored_in_another_episode_replays_exactly(task):
    """A state from the middle of one episode, restored in an env that has drawn another
    placement (another seed): the same actions give the same observations, rewards and
    success flags (the placement is part of the state)."""
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (60, 4)).astype(np.float32)
    first = make_env(f"metaworld:{task}", seed=0)
    first.reset(seed=0)
    _episode(first, actions[:20])
    state = first.get_state()
    expected = _episode(first, actions[20:])

    other = make_env(f"metaworld:{task}", seed=7)
    other.reset(seed=7)
    _episode(other, actions[:5])
    other.set_state(state)
    replayed = _episode(other, actions[20:])
    for a, b in zip(expected, replayed):
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=0, atol=1e-9)
    first.close()
    other.close()


def test_each_reset_draws_a_placement_from_the_seed_and_the_goal_is_observed():
    env = make_env("metaworld:reach", seed=0)
    a, _ = env.reset(seed=3)
    b, _ = env.reset()
    c, _ = env.reset(seed=3)
    np.testing.assert_allclose(a, c, rtol=0, atol=1e-12)
    assert np.abs(a[36:] - b[36:]).max() > 1e-3, "a second reset drew the same goal"
    assert np.abs(a[36:]).max() > 0, "the goal is hidden"
    assert env.max_episode_steps == 200
    env.close()


def test_the_welds_keep_metaworlds_values_and_the_model_s_new_one():
    env = make_env("metaworld:door-open", seed=0)
    env.reset(seed=0)
    model = env.unwrapped.mw.model
    np.testing.assert_array_equal(model.eq_data[0, :11], [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5.0])
    assert (model.eq_data[0, 11:] == 1.0).all()
    env.close()


def test_unknown_and_unshipped_tasks_are_refused_by_name():
    with pytest.raises(UnknownEnvError, match="closest: metaworld:door-open"):
        make_env("metaworld:door-opne")
    with pytest.raises(UnknownEnvError, match="named without the version"):
        make_env("metaworld:door-open-v3")
    with pytest.raises(UnknownEnvError, match="shelf-place is not shipped.*scripted policy"):
        make_env("metaworld:shelf-place")


def test_without_metaworld_the_error_says_how_to_install_it(monkeypatch, capsys):
    """Making one says how to install it, and so does the list of ids (on stderr: stdout stays
    a list of ids)."""
    from prefrl.cli.tools import cmd_envs

    assert cmd_envs(["metaworld"]) == 0 and "cannot be made" not in capsys.readouterr().err
    for name in [m for m in sys.modules if m == "metaworld" or m.startswith("metaworld.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "metaworld", None)
    with pytest.raises(ImportError, match="pip install --no-deps metaworld==3.1.1"):
        make_env("metaworld:reach")
    assert cmd_envs([]) == 0
    out, err = capsys.readouterr()
    assert "metaworld:reach" in out.splitlines() and "pip" not in out
    assert "metaworld:* cannot be made here yet: the MetaWorld tasks need metaworld 3.1.1" in err
    assert "adroit:*" not in err  # (installed here)


def test_scripted_demos_succeed_and_replay_here(tmp_path):
    from prefrl.demos.make import check_demos, script_demos

    demos = script_demos("metaworld:reach", 2, out=tmp_path / "reach")
    assert len(demos.demos) == 2
    assert all(d.success[-1] for d in demos.demos)
    report = check_demos(tmp_path / "reach")
    assert all(row.usable for row in report)


def test_frames_show_the_arm_and_follow_the_state():
    """A frame holds the red arm, and frames of two states differ where the arm moved."""
    env = make_env("metaworld:reach", seed=0, render=RenderSettings(96, 96))
    env.reset(seed=0)
    before = env.render().astype(int)
    for _ in range(15):
        env.step(np.array([1.0, 0.0, -1.0, 0.0], np.float32))
    after = env.render().astype(int)
    r, g, b = np.moveaxis(before, -1, 0)
    arm = (r > 120) & (r - g > 60) & (r - b > 60)
    assert arm.mean() > 0.02, f"{arm.mean():.1%} of the frame is the arm"
    assert np.abs(after - before).max(axis=-1).mean() > 0.005
    env.close()
