"""Demonstrations: made by the maze's script, stored in Minari's format with their states,
replayed, rendered; bad demo files refused with what to do."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from prefrl.cli import main
from prefrl.data.demos import Demo, DemoSet
from prefrl.demos.make import check_demos, rollout_demo, script_demos
from prefrl.envs import make_env


@pytest.fixture(scope="module")
def maze_demos():
    return script_demos("toy:maze", 3, seed=0, hold=10)


def test_scripted_demos_end_in_a_stable_success_and_round_trip_through_minari(maze_demos, tmp_path):
    import minari

    for demo in maze_demos.demos:
        assert demo.ends_in_success and len(demo) == demo.first_success + 11
        assert demo.success[demo.first_success :].all() and demo.states.shape == (len(demo) + 1, 7)
    back = DemoSet.load(maze_demos.save(tmp_path / "d"))
    assert (back.env_id, len(back), back.has_actions) == ("toy:maze", 3, True)
    assert back.info["source"] == "scripted" and back[1].info == {"source": "scripted", "seed": 1}
    for a, b in zip(maze_demos.demos, back.demos, strict=True):
        for key in ("states", "observations", "actions", "rewards", "success"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert minari.MinariDataset(tmp_path / "d" / "data").total_episodes == 3
    # States alone: Minari still stores an action array; the file says there are none.
    bare = DemoSet("toy:maze", [dataclasses.replace(d, actions=None) for d in maze_demos.demos])
    with pytest.raises(ValueError, match="give action_dim"):
        bare.save(tmp_path / "bare")
    again = DemoSet.load(bare.save(tmp_path / "bare", action_dim=2))
    assert not again.has_actions and again[0].actions is None
    np.testing.assert_array_equal(again[2].states, maze_demos[2].states)
    with pytest.raises(ValueError, match="no actions to replay"):
        check_demos(again)


def test_replaying_a_demo_tells_whether_it_still_succeeds(maze_demos):
    assert all(c.success_at_end and c.max_state_error == 0 for c in check_demos(maze_demos))
    broken = maze_demos.demos[0]
    broken = dataclasses.replace(broken, actions=broken.actions[::-1].copy())
    checks = check_demos(DemoSet("toy:maze", [broken, maze_demos.demos[1]]))
    assert [c.success_at_end for c in checks] == [False, True] and checks[0].max_state_error > 0
    with pytest.raises(ValueError, match="the demos are of toy:maze, not toy:maze-open"):
        check_demos(maze_demos, "toy:maze-open")


def test_the_check_says_how_long_each_demos_end_keeps_success(maze_demos):
    """At rest in the goal (10 steps after the first success), the last action held keeps the
    point there for longer than from the step after the first success, when it is still
    moving; the horizon caps the count."""
    at_rest = check_demos(maze_demos)
    moving = DemoSet("toy:maze", [_cut(d, d.first_success + 1) for d in maze_demos.demos])
    for rest, move in zip(at_rest, check_demos(moving), strict=True):
        assert 0 <= move.holds < rest.holds <= 50 and move.success_at_end
    assert [c.holds for c in check_demos(maze_demos, hold_horizon=3)] == [3, 3, 3]


def test_settled_demos_end_where_success_lasts_with_the_last_action_held(maze_demos):
    """--settle 30: each demo goes on past --hold until its state would keep success 30 steps
    with the last action held, which the check then measures; a settle no state reaches within
    the episode leaves no demo."""
    settled = script_demos("toy:maze", 3, seed=0, hold=10, settle=30)
    assert settled.info["settle"] == 30
    for before, after, check in zip(maze_demos.demos, settled.demos,
                                    check_demos(settled, hold_horizon=60), strict=True):  # fmt: skip
        assert len(after) > len(before) and check.holds >= 30 and check.success_at_end
        np.testing.assert_allclose(after.states[: len(before) + 1], before.states)
    with pytest.raises(RuntimeError, match="solved 0 of 10 episodes"):
        script_demos("toy:maze", 1, seed=0, hold=10, settle=2000)


def _cut(demo, steps: int):
    return dataclasses.replace(
        demo, states=demo.states[: steps + 1], observations=demo.observations[: steps + 1],
        actions=demo.actions[:steps], rewards=demo.rewards[:steps], success=demo.success[:steps],
    )  # fmt: skip


def test_only_stable_successes_become_demos_and_the_task_must_say_success():
    env = make_env("toy:maze-open", seed=0)
    maze = env.unwrapped
    from prefrl.envs.maze import scripted_action, shortest_path

    waypoints, state = [maze.centre(c) for c in shortest_path(maze)], {"i": 0, "t": 0}

    def arrive_then_leave(obs):
        state["t"] += 1
        if state["t"] > 70:
            return np.array([-1.0, 0.0], np.float32)  # away from the goal again
        action, state["i"] = scripted_action(maze, waypoints, state["i"])
        return action

    assert rollout_demo(env, arrive_then_leave, 0, hold=40, info={}) is None
    env.close()
    plain = make_env("toy:point-reach", seed=0)
    with pytest.raises(ValueError, match="reports no success flag"):
        rollout_demo(plain, lambda obs: np.zeros(2), 0, hold=5, info={})
    plain.close()
    with pytest.raises(ValueError, match="scripted demos exist for the built-in mazes"):
        script_demos("toy:point-reach", 1)


def test_bad_demo_files_are_refused_with_what_to_do(tmp_path, maze_demos):
    from test_offline import synthetic

    synthetic().save(tmp_path / "no-states")  # an offline dataset: no simulator states
    with pytest.raises(ValueError, match="has no simulator states; RFCL starts episodes from"):
        DemoSet.load(tmp_path / "no-states")
    with pytest.raises(FileNotFoundError, match="not a Minari dataset .*; make demos with `pre"):
        DemoSet.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="none does not exist; make demos with `prefrl"):
        DemoSet.load(tmp_path / "none")
    d = maze_demos[0]
    with pytest.raises(ValueError, match="has 5 success: expected"):
        Demo(d.states, d.observations, d.actions, d.rewards, d.success[:5])
    with pytest.raises(ValueError, match="differ in state/observation sizes"):
        DemoSet("toy:maze", [d, dataclasses.replace(d, states=d.states[:, :3])])


def test_the_demos_command_scripts_checks_and_renders(tmp_path, capsys):
    out = tmp_path / "demos"
    assert main(["demos", "script", "--episodes", "2", "--hold", "5", "--out", str(out)]) == 0
    assert "2 demos of toy:maze (with actions)" in capsys.readouterr().out
    assert main(["demos", "info", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "made with: source scripted, seed 0, hold 5, settle 0" in printed
    assert "\nfrom reset seeds 0, 1\n" in printed
    assert main(["demos", "check", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 of 2 demos end in success both by their stored flags and replayed here" in printed
    assert re.search(r"demo 1: \d+ steps; stored flags: success at the end; replayed here: "
                     r"success at the end .* keeps success for \d+\+? steps with the last",
                     printed)  # fmt: skip
    assert main(["demos", "check", str(out), "--hold-horizon", "0"]) == 2
    assert "--hold-horizon 0 is invalid: expected an integer >= 1" in capsys.readouterr().err
    video = tmp_path / "d.mp4"
    assert (
        main(["demos", "video", str(out), "--index", "1", "--size", "64", "--out", str(video)]) == 0
    )
    import av

    with av.open(str(video)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames == len(DemoSet.load(out)[1]) + 1
    assert main(["demos", "video", str(out), "--index", "7", "--out", str(video)]) == 2
    assert "--index 7 is invalid: the file holds demos 0 to 1" in capsys.readouterr().err
    # Refused before any work: an --out that holds demos, a negative --hold
    for action in (["script"], ["plan", "--env", "adroit:door"]):
        assert main(["demos", *action, "--out", str(out)]) == 2
        assert "already holds demos; choose another --out" in capsys.readouterr().err
    assert main(["demos", "script", "--hold", "-1", "--out", str(tmp_path / "new")]) == 2
    assert "--hold -1 is invalid: expected an integer >= 0" in capsys.readouterr().err
    assert main(["demos", "script", "--settle", "-2", "--out", str(tmp_path / "new")]) == 2
    assert "--settle -2 is invalid: expected an integer >= 0" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_force_replaces_demos_only_once_the_new_ones_are_made(tmp_path, capsys):
    out = tmp_path / "demos"
    assert main(["demos", "script", "--episodes", "2", "--hold", "5", "--out", str(out)]) == 0
    assert main(["demos", "script", "--episodes", "2", "--out", str(out)]) == 2
    assert (
        "choose another --out, or replace them (--force; in Python, replace=True)"
        in capsys.readouterr().err
    )
    assert len(DemoSet.load(out)) == 2
    # Bad flags stop it before anything is made: the old demos stay.
    assert main(["demos", "script", "--hold", "-1", "--force", "--out", str(out)]) == 2
    assert len(DemoSet.load(out)) == 2
    args = ["demos", "script", "--episodes", "3", "--hold", "5", "--seed", "4", "--force"]
    assert main([*args, "--out", str(out)]) == 0
    replaced = DemoSet.load(out)
    assert len(replaced) == 3 and replaced.info["seed"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demos"]  # nothing left beside it
    # A folder holding anything else is never replaced.
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main([*args, "--out", str(other)]) == 2
    assert "already holds other files; choose another --out" in capsys.readouterr().err
    assert (other / "keep.txt").read_text() == "mine"


def test_d4rl_adroit_human_demos_import_as_replayable_states(tmp_path):
    """A file in D4RL's Adroit layout (per-step qpos, qvel and the door's position; episodes
    ended by timeouts), written from two short door episodes: imported, every state and
    observation is the recorded one, and the actions replay from the first state."""
    import h5py

    from prefrl.demos.imports import import_d4rl_demos

    env = make_env("adroit:door", seed=0)
    base, rng = env.unwrapped, np.random.default_rng(0)
    rows = {k: [] for k in ("observations", "actions", "timeouts", "qpos", "qvel", "door")}
    for episode in range(2):
        obs, _ = env.reset(seed=episode)
        for t in range(6):
            action = rng.uniform(-1, 1, env.action_dim).astype(np.float32)
            scene = base.get_env_state()
            rows["qpos"].append(scene["qpos"])
            rows["qvel"].append(scene["qvel"])
            rows["door"].append(scene["door_body_pos"])
            rows["observations"].append(obs)
            rows["actions"].append(action)
            rows["timeouts"].append(t == 5)
            obs = env.step(action)[0]
    env.close()
    with h5py.File(tmp_path / "door-human.hdf5", "w") as f:
        for key in ("observations", "actions", "timeouts"):
            f[key] = np.asarray(rows[key])
        f["infos/qpos"], f["infos/qvel"] = np.asarray(rows["qpos"]), np.asarray(rows["qvel"])
        f["infos/door_body_pos"] = np.asarray(rows["door"])
    demos = import_d4rl_demos(tmp_path / "door-human.hdf5", "adroit:door")
    assert len(demos) == 2 and [len(d) for d in demos.demos] == [6, 6]
    np.testing.assert_allclose(demos[1].observations[:6], np.asarray(rows["observations"][6:]),
                               atol=1e-6)  # fmt: skip
    checks = check_demos(demos)
    assert all(c.max_state_error < 1e-6 for c in checks)
    with pytest.raises(ValueError, match="lacks infos/desired_orien: not a D4RL adroit:pen"):
        import_d4rl_demos(tmp_path / "door-human.hdf5", "adroit:pen")
    with h5py.File(tmp_path / "door-human.hdf5", "a") as f:
        f["infos/qvel"][3, 0] = np.nan
    with pytest.raises(ValueError, match="infos/qvel hold NaN or inf; not imported"):
        import_d4rl_demos(tmp_path / "door-human.hdf5", "adroit:door")


@pytest.mark.parametrize("task", ["door", "pen", "hammer", "relocate"])
def test_adroit_frames_show_the_hand_and_for_the_pen_the_pen(task):
    """What a demo video and an Adroit clip show: the hand (its skin colour) in every task's
    frame, across resets, and on the pen the blue pen in the hand (the camera once looked at
    the table from under the hand: no hand, no pen)."""
    from prefrl.envs import RenderSettings

    env = make_env(f"adroit:{task}", seed=0, render=RenderSettings(128, 128))
    for seed in (0, 1):
        env.reset(seed=seed)
        r, g, b = np.moveaxis(env.render().astype(int), -1, 0)
        hand = (r > 120) & (r - b > 50) & (g - b > 20) & (r > g)
        assert hand.mean() > 0.02, f"seed {seed}: {hand.mean():.1%} of the frame is the hand"
        if task == "pen":
            pen = (b > 120) & (b - r > 80) & (b - g > 40)
            assert pen.mean() > 0.002, f"seed {seed}: {pen.mean():.2%} of the frame is the pen"
    env.close()


def test_dapg_demos_replay_from_their_reset_states_past_the_time_limit(tmp_path, capsys):
    """hand_dapg's layout (reset qpos, qvel and door position, then actions): a demo whose door
    starts open is replayed and kept whole (or cut `hold` steps after its first success), past
    door's 200-step limit; one that never opens the door is left out, said so; bad files are
    refused by name."""
    import pickle

    from conftest import dapg_door_demos

    from prefrl.demos.imports import import_dapg_demos

    raw = dapg_door_demos()
    scene = raw[1]["init_state_dict"]

    def write(name, data):
        (tmp_path / name).write_bytes(pickle.dumps(data))
        return tmp_path / name

    demos = import_dapg_demos(write("door.pickle", raw), "adroit:door", hold=220)
    assert "1 of 2 demos reach no stable success when replayed here, left out: 1" in (
        capsys.readouterr().out
    )
    assert len(demos) == 1 and len(demos[0]) == 221 and demos[0].success.all()
    assert demos.info["left_out"] == "1"
    (check,) = check_demos(demos)
    assert check.success_at_end and check.max_state_error < 1e-6
    whole = import_dapg_demos(tmp_path / "door.pickle", "adroit:door")
    assert len(whole) == 1 and len(whole[0]) == 230 and whole.info["hold"] == "to the end"
    whole.save(tmp_path / "whole")
    assert main(["demos", "info", str(tmp_path / "whole")]) == 0
    assert "\nfrom the source's demos 0\n" in capsys.readouterr().out  # (which were kept)
    np.testing.assert_allclose(whole[0].states[:222], demos[0].states, atol=1e-9)
    with pytest.raises(ValueError, match="none of its 1 demos reaches a stable success"):
        import_dapg_demos(write("closed.pickle", raw[1:]), "adroit:door")
    with pytest.raises(ValueError, match="is not a DAPG demo pickle"):
        import_dapg_demos(write("dict.pickle", raw[0]), "adroit:door")
    with pytest.raises(
        ValueError, match="init_state_dict lacks desired_orien: not DAPG adroit:pen"
    ):
        import_dapg_demos(tmp_path / "door.pickle", "adroit:pen")
    with pytest.raises(ValueError, match="^env toy:maze: DAPG Adroit demos are of adroit:door"):
        import_dapg_demos(tmp_path / "door.pickle", "toy:maze")
    nan = {**scene, "qvel": np.where(np.arange(30) == 3, np.nan, scene["qvel"])}
    with pytest.raises(ValueError, match="demo 0's qvel hold NaN or inf; not imported"):
        import_dapg_demos(write("nan.pickle", [{**raw[1], "init_state_dict": nan}]), "adroit:door")
    with pytest.raises(ValueError, match=r"demo 0's actions have shape \(30, 4\); adroit:door"):
        import_dapg_demos(write("narrow.pickle", [{**raw[1], "actions": np.zeros((30, 4))}]),
                           "adroit:door")  # fmt: skip


def test_recording_from_a_policy_keeps_only_stable_successes(tmp_path):
    """A barely trained SAC policy never reaches the maze's goal: nothing to keep, said so."""
    from conftest import short_sac_run

    from prefrl.demos.make import record_demos

    run = short_sac_run(tmp_path, "sac", env="toy:maze", steps=300)
    with pytest.raises(RuntimeError, match="reached no stable success in 2 episodes"):
        record_demos(run, episodes=1, max_tries=2)


def test_a_policy_records_demos_of_a_task_with_the_same_observations(tmp_path):
    """`record_demos(env=...)`: a policy trained on one task records demos of another with
    the same observations and actions (here steering straight to the goal, acting for a
    toy:maze policy, recorded in the open room of toy:maze-open); a task of other sizes is
    refused, naming both."""
    from conftest import short_sac_run

    from prefrl.demos.make import record_demos
    from prefrl.training.policies import load_policy

    trained = load_policy(short_sac_run(tmp_path, "sac", env="toy:maze", steps=300))

    class ScriptedActions(type(trained)):
        def __call__(self, obs):  # (the maze's observation: position, velocity, goal, hit)
            return np.clip(2.0 * (obs[4:6] - obs[0:2]) - 1.2 * obs[2:4], -1, 1)

    policy = ScriptedActions(trained.config, trained.agent, trained.state, trained.checkpoint)
    demos = record_demos(policy, episodes=1, env="toy:maze-open", max_tries=1)
    assert demos.env_id == "toy:maze-open" and demos.info["trained_on"] == "toy:maze"
    assert demos[0].ends_in_success
    with pytest.raises(ValueError, match=r"env toy:point-reach has 6 observations and 2 "
                       r"actions; the policy, trained on toy:maze, takes 7 and gives 2"):  # fmt: skip
        record_demos(trained, episodes=1, env="toy:point-reach")
    # --spread-from: 4 successes recorded, the 2 that start farthest apart kept
    spread = record_demos(policy, episodes=2, env="toy:maze-open", spread_from=4, max_tries=4)
    starts = {d.info["seed"]: d.observations[0] for d in spread.demos}
    assert len(starts) == 2 and spread.info["spread_from"] == 4
    assert np.linalg.norm(starts[1] - starts[3]) > 0.4  # seeds 1 and 3: the two far apart
    assert set(starts) == {1, 3}
    with pytest.raises(ValueError, match=r"spread.from 1 is invalid: expected 0 \(off\) or "
                       r"at least (--)?episodes \(2\)"):  # fmt: skip
        record_demos(policy, episodes=2, spread_from=1)


def test_demos_spread_out_over_their_starts():
    """`spread_out` keeps the start farthest from the mean, then each time the one farthest
    from those kept: on starts at 0, 0.1, 0.2, 5 and 10, three kept are 10, 0 and 5, in
    their recorded order."""
    from prefrl.data.demos import Demo
    from prefrl.demos.make import spread_out

    def demo(x):
        obs = np.array([[x, 1.0], [x, 2.0]], np.float32)
        return Demo(obs, obs, np.zeros((1, 1), np.float32), np.zeros(1), np.ones(1, bool),
                    {"start": x})  # fmt: skip

    demos = [demo(x) for x in (0.0, 5.0, 0.1, 0.2, 10.0)]
    assert [d.info["start"] for d in spread_out(demos, 3)] == [0.0, 5.0, 10.0]
    assert spread_out(demos, 5) == demos
    twins = [demo(1.0), demo(1.0), demo(3.0)]  # a repeated start is kept once before its twin
    assert [d.info["start"] for d in spread_out(twins, 2)] == [1.0, 3.0]


def test_a_dense_adroit_task_pays_the_planners_score_with_the_sparse_tasks_success():
    """adroit:pen-dense is adroit:pen with the shaped score as its reward: the same
    observations and success flags for the same actions, and each step's reward the score of
    the state it reached."""
    pytest.importorskip("gymnasium_robotics")
    from prefrl.envs import known_env_ids
    from prefrl.envs.adroit import pen_score

    assert {"adroit:door-dense", "adroit:relocate-dense"} <= set(known_env_ids("adroit"))
    sparse, dense = make_env("adroit:pen"), make_env("adroit:pen-dense")
    actions = np.random.default_rng(0).uniform(-1, 1, (30, sparse.action_dim))
    np.testing.assert_allclose(sparse.reset(seed=3)[0], dense.reset(seed=3)[0], atol=1e-9)
    rewards = []
    for action in actions:
        obs_s, success, *_ = sparse.step(action)
        obs_d, reward, terminated, _, info = dense.step(action)
        np.testing.assert_allclose(obs_s, obs_d, atol=1e-9)
        assert success == float(info["success"]) and not terminated
        assert reward == pytest.approx(pen_score(dense.unwrapped))
        rewards.append(reward)
    assert len(set(rewards)) > 1, rewards  # (shaped: it varies)


def _maniskill2(path, trajectories: list[dict], env_id: str = "PickCube-v0", infos=None):
    """`path` (.h5) and the .json beside it as ManiSkill2 writes them: `trajectories` are the
    arrays of each traj_<i> (env_states, actions, obs, success, ...); `infos` each episode's
    json info (its final success)."""
    import json

    import h5py

    with h5py.File(path, "w") as f:
        for i, arrays in enumerate(trajectories):
            for key, value in arrays.items():
                f[f"traj_{i}/{key}"] = value
    episodes = [{"episode_id": i, "episode_seed": 7 + i, "control_mode": "pd_ee_delta_pose",
                 **({"info": infos[i]} if infos else {})} for i in range(len(trajectories))]  # fmt: skip
    path.with_suffix(".json").write_text(json.dumps({
        "env_info": {"env_id": env_id, "max_episode_steps": 200}, "episodes": episodes}))  # fmt: skip
    return path


def _from_demos(demos, obs: bool = True) -> list[dict]:
    """Each demo's arrays under ManiSkill2's names."""
    return [{"env_states": d.states, "actions": d.actions, "success": d.success,
             **({"obs": d.observations} if obs else {})} for d in demos.demos]  # fmt: skip


def test_maniskill2_trajectories_read_with_their_states(tmp_path):
    """trajectory.h5 + trajectory.json as ManiSkill2 writes them (one episode with per-step
    success, one older-style with only the final success in the json)."""
    import h5py

    from prefrl.data.demos import read_maniskill2

    rng = np.random.default_rng(0)
    trajectories = [{"env_states": rng.normal(size=(steps + 1, 13)),
                     "actions": rng.uniform(-1, 1, (steps, 4)).astype(np.float32),
                     "obs": rng.normal(size=(steps + 1, 9)).astype(np.float32)}
                    for steps in (5, 3)]  # fmt: skip
    trajectories[0]["success"] = np.array([0, 0, 1, 1, 1], bool)
    path = _maniskill2(tmp_path / "trajectory.h5", trajectories, infos=[{}, {"success": True}])
    demos = read_maniskill2(path)
    assert (demos.env_id, len(demos), demos.state_dim, demos.obs_dim) == ("PickCube-v0", 2, 13, 9)
    assert demos[0].first_success == 2 and demos[1].success.tolist() == [False, False, True]
    assert demos[0].info["seed"] == 7
    with h5py.File(path, "a") as f:
        del f["traj_1/env_states"]
    with pytest.raises(ValueError, match="traj_1 has no simulator states"):
        read_maniskill2(path)


def test_maniskill2_import_refuses_what_rfcl_could_not_use(tmp_path, maze_demos, capsys):
    """Checked at import, naming the trajectory and step: finite values, one size of actions and
    states in every trajectory, sizes of the env the demos are for (--env where the file's id
    is no prefrl env), success flags; trajectories that never succeed are left out, said so."""
    good = _from_demos(maze_demos)

    def refused(trajectories, *flags, env_id="toy:maze", infos=None) -> str:
        path = _maniskill2(tmp_path / "t.h5", trajectories, env_id, infos)
        out = tmp_path / "out"
        assert main(["demos", "import-maniskill2", str(path), "--out", str(out), *flags]) == 2
        assert not out.exists()
        return " ".join(capsys.readouterr().err.split())

    nan = [dict(t) for t in good]
    nan[1]["actions"] = nan[1]["actions"].copy()
    nan[1]["actions"][4, 1] = np.nan
    assert "t.h5: traj_1's actions hold nan at step 4 (column 1): not imported" in refused(nan)
    wide = [dict(t) for t in good]
    wide[0]["actions"] = np.zeros((len(maze_demos[0]), 9), np.float32)
    wide[1]["actions"] = np.zeros((len(maze_demos[1]), 8), np.float32)
    assert "traj_1's actions are 8 wide and traj_0's 9: a file's demos are of one env" in (
        refused(wide))  # fmt: skip
    assert ("holds demos of PickCube-v0 (its .json's env_info.env_id), which is no env prefrl "
            "has: give --env") in refused(good, env_id="PickCube-v0")  # fmt: skip
    rng = np.random.default_rng(0)
    other = [{"env_states": rng.normal(size=(6, 31)), "obs": rng.normal(size=(6, 31)),
              "actions": rng.uniform(-1, 1, (5, 8)), "success": np.ones(5, bool)}]  # fmt: skip
    message = refused(other)
    assert ("holds actions of size 8 and states of size 31 and observations of size 31, where "
            "toy:maze (the file's env_info.env_id) has actions of size 2 and states of size 7 "
            "and observations of size 7: these are demos of another env: give --env"
            ) in message  # fmt: skip
    assert "--env toy:maze has actions of size 2" in refused(other, "--env", "toy:maze",
                                                             env_id="OpenCabinetDrawer-v1")  # fmt: skip
    failing = [{**t, "success": np.zeros_like(t["success"])} for t in good]
    assert "none of its 3 trajectories succeeds (their success flags are all False)" in (
        refused(failing))  # fmt: skip
    flagless = [{k: v for k, v in t.items() if k != "success"} for t in good]
    assert "traj_0 has no success flags" in refused(flagless)
    # One that never succeeds is left out; the file's id is not prefrl's, --env says whose
    mixed = [good[0], {**good[1], "success": np.zeros_like(good[1]["success"])}, good[2]]
    path = _maniskill2(tmp_path / "mixed.h5", mixed, "PickCube-v0")
    assert main(["demos", "import-maniskill2", str(path), "--env", "toy:maze",
                 "--out", str(tmp_path / "mixed")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "warning: 1 of 3 trajectories of" in out and "left out: traj_1" in out
    demos = DemoSet.load(tmp_path / "mixed")
    assert (demos.env_id, demos.info["maniskill2_env"]) == ("toy:maze", "PickCube-v0")
    assert len(demos) == 2
    assert all(c.success_at_end and c.max_state_error == 0 for c in check_demos(demos))


def test_maniskill2_files_that_are_not_say_what_they_are(tmp_path, maze_demos, monkeypatch):
    """Not HDF5, a folder, a missing .h5, an empty trajectory: each named, no traceback; the
    demos keep the file's absolute path, and without observations get the env's."""
    from prefrl.data.demos import read_maniskill2
    from prefrl.demos.imports import import_maniskill2_demos

    (tmp_path / "notes.h5").write_text("not hdf5")
    with pytest.raises(ValueError, match="notes.h5 is not an HDF5 file: give ManiSkill2's"):
        read_maniskill2(tmp_path / "notes.h5")
    with pytest.raises(FileNotFoundError, match="missing.h5 does not exist: give ManiSkill2's"):
        read_maniskill2(tmp_path / "missing.h5")
    (tmp_path / "notes.h5").unlink()
    _maniskill2(tmp_path / "good.h5", _from_demos(maze_demos, obs=False), "toy:maze")
    with pytest.raises(ValueError, match=" is a folder: give ManiSkill2's trajectory .h5 file "
                       r"\(beside its .json\); it holds good.h5"):  # fmt: skip
        read_maniskill2(tmp_path)
    empty = _from_demos(maze_demos)
    empty[1] = {"env_states": np.zeros((1, 7)), "actions": np.zeros((0, 2)),
                "success": np.zeros(0, bool)}  # fmt: skip
    _maniskill2(tmp_path / "empty.h5", empty, "toy:maze")
    with pytest.raises(ValueError, match=r"empty.h5: traj_1 has no steps \(0 actions\)"):
        read_maniskill2(tmp_path / "empty.h5")
    monkeypatch.chdir(tmp_path)
    demos = import_maniskill2_demos(Path("good.h5"))
    assert demos.info["file"] == str(tmp_path / "good.h5")
    np.testing.assert_allclose(demos[0].observations, maze_demos[0].observations, atol=1e-6)


def test_planner_drives_the_arm_and_one_grasp_level_with_smooth_noise():
    from prefrl.demos.planner import PLANNED_TASKS, mppi_update, plan_basis, smooth_noise

    names = ["A_ARTz", "A_ARRx", "A_WRJ1", "A_FFJ3", "A_FFJ1", "A_FFJ0", "A_THJ0", "A_THJ4"]
    basis = plan_basis(names, PLANNED_TASKS["adroit:door"])  # (the thumb stays out)
    np.testing.assert_array_equal(basis @ [0.5, -0.5, 1.0], [0.5, -0.5, 0, 0, 1, 1, 0, 0])
    basis = plan_basis(names, PLANNED_TASKS["adroit:relocate"])  # (the thumb grasps too)
    np.testing.assert_array_equal(basis @ [0.5, -0.5, 1.0], [0.5, -0.5, 0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(plan_basis(names, PLANNED_TASKS["adroit:pen"]), np.eye(8))

    noise = smooth_noise(np.random.default_rng(0), 3, 9, 2, 0.5, every=4)
    assert noise.shape == (3, 9, 2)
    np.testing.assert_allclose(noise[:, 2], (noise[:, 0] + noise[:, 4]) / 2)  # (interpolated)
    assert not np.allclose(noise[:, 4], noise[:, 0])

    plans = np.array([[[0.0]], [[1.0]], [[-1.0]]])
    np.testing.assert_allclose(mppi_update(plans, np.array([0.0, 1.0, -5.0]), 1e-3), [[1.0]])
    even = mppi_update(plans, np.array([1.0, 1.0, 1.0]), 0.1)  # (equal returns: the mean)
    np.testing.assert_allclose(even, [[0.0]], atol=1e-12)


@pytest.mark.parametrize(("env_id", "seed"), [("adroit:door", 1000), ("adroit:relocate", 1001)])
def test_planned_demos_succeed_and_replay(env_id, seed):
    """The planner opens the door (grasps the ball and carries it to its target) and keeps it
    so for the hold; the demo replays to the same success from its first state."""
    pytest.importorskip("gymnasium_robotics")
    from prefrl.demos.planner import plan_demos

    demos = plan_demos(env_id, 1, seed=seed, log=lambda _: None)
    demo = demos[0]
    assert demo.ends_in_success and demo.success[demo.first_success :].all()
    assert demos.info["planner"] == "mppi" and demo.info["seed"] >= seed
    assert (demos.info["horizon"], demos.info["noise"]) == (20, 0.3)  # (the task's own, not None)
    (check,) = check_demos(demos)
    assert check.success_at_end


def test_planner_refuses_bad_settings():
    from prefrl.demos.planner import PlanConfig, plan_demos

    with pytest.raises(ValueError, match="no planner for toy:maze.*adroit:door.*demos record"):
        plan_demos("toy:maze", 1)
    with pytest.raises(ValueError, match=r"--samples=1 is invalid: expected an integer >= 2"):
        PlanConfig(samples=1)
    with pytest.raises(ValueError, match=r"--horizon=0 is invalid"):
        PlanConfig(horizon=0)
    with pytest.raises(ValueError, match="episodes 0 is invalid"):
        plan_demos("adroit:door", 0)
