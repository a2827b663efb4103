"""RFCL's loop: what it refuses before any run exists, its half-and-half batches, and a short
seeded maze run whose curriculum moves and which resumes mid-stage."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from prefrl.agents import SACConfig
from prefrl.data import ReplayBuffer
from prefrl.data.demos import DemoSet
from prefrl.demos.make import script_demos
from prefrl.demos.rfcl import RFCLConfig, RFCLRun, load_demos, train_rfcl
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.plots import curriculum_events

SMALL = SACConfig(hidden_dims=(32, 32), num_critics=4, num_min_critics=2, critic_layer_norm=True,
                  backup_entropy=False, batch_size=64, target_entropy_scale=0.5)  # fmt: skip


@pytest.fixture(scope="module")
def gentle_demos(tmp_path_factory):
    """Two maze demos by the scripted controller with its actions clipped to 0.4 and 0.2 (it
    pushes to the bounds otherwise): the largest action of each dimension is known."""
    from prefrl.demos.make import rollout_demo
    from prefrl.envs.maze import scripted_action, shortest_path

    env = _maze()
    maze = env.unwrapped
    waypoints = [maze.centre(c) for c in shortest_path(maze)]
    demos = []
    for seed in (0, 1):
        index = {"next": 0}

        def act(obs, index=index):
            action, index["next"] = scripted_action(maze, waypoints, index["next"])
            return np.clip(action, [-0.4, -0.2], [0.4, 0.2])

        demos.append(rollout_demo(env, act, seed, 20, {"source": "scripted", "seed": seed}))
    env.close()
    path = tmp_path_factory.mktemp("demos") / "gentle"
    DemoSet("toy:maze", demos).save(path)
    return path


def _config(tmp_path, demos, **kw):
    base = {"env": "toy:maze", "demos": demos, "steps": 3000, "warmstart_steps": 500,
            "eval_interval": 1500, "eval_episodes": 4, "checkpoint_interval": 1500,
            "log_interval": 500, "runs_dir": tmp_path / "runs", "name": "r", "progress": False,
            "sac": SMALL}  # fmt: skip
    return RFCLConfig(**{**base, **kw})


def _last_states(tmp_path, demo_file) -> list[int]:
    """Each kept demo's last state index: where its reverse frontier starts."""
    return [len(d.states) - 1 for d in load_demos(_config(tmp_path, demo_file), _maze()).demos]


def test_demos_are_trimmed_and_half_of_each_stage_one_batch(tmp_path, demo_file):
    config = _config(tmp_path, demo_file, trim_success=5)
    run = RFCLRun(config, tmp_path)
    for demo in run.demos.demos:
        assert len(demo) == demo.first_success + 5 and len(demo.states) == len(demo) + 1
    assert len(run.offline) == sum(len(d) for d in run.demos.demos)
    obs = np.zeros(7, np.float32)
    for _ in range(200):  # online transitions, all of them unlike any demo's
        run.online.add(obs + 100, np.zeros(2, np.float32), 0.0, obs + 100, False)
    batch = run.batch()
    from_demos = batch.obs[:, 0] < 50
    assert len(batch.obs) == 64 and from_demos.sum() == 32
    np.testing.assert_array_equal(batch.terminated, 0)  # never terminal
    run.close()
    plain = RFCLRun(dataclasses.replace(config, demo_actions=False), tmp_path)
    for _ in range(200):
        plain.online.add(obs + 100, np.zeros(2, np.float32), 0.0, obs + 100, False)
    assert (plain.batch().obs[:, 0] > 50).all()  # states alone: all online
    plain.close()
    # The baselines: no reverse stage; the task's own initial states (seeds drawn uniformly).
    baseline = RFCLRun(dataclasses.replace(config, reverse_curriculum=False,
                                           forward_curriculum=False), tmp_path)  # fmt: skip
    first, started, limit = baseline.start_episode()
    assert baseline.stage == 2 and isinstance(started, int) and limit == 150
    assert np.linalg.norm(first[:2] - baseline.env.unwrapped.centre((1, 1))) < 0.5  # start cell
    for _ in range(200):
        baseline.online.add(obs + 100, np.zeros(2, np.float32), 0.0, obs + 100, False)
    assert (baseline.batch().obs[:, 0] < 50).sum() == 32  # SAC + demos: half demo transitions
    baseline.close()


def test_a_short_maze_run_moves_its_curriculum_and_resumes_mid_stage(tmp_path, demo_file):
    first = train_rfcl(_config(tmp_path, demo_file))
    ckpt = json.loads((first.run_dir / "checkpoints" / "step_000003000" / "loop.json").read_text())
    assert ckpt["stage"] == 1 and ckpt["reverse"]["frontier"] != _last_states(tmp_path, demo_file)
    result = train_rfcl(_config(tmp_path, demo_file, steps=4500, resume=first.run_dir))
    assert result.steps == 4500 and not result.interrupted
    rows = [json.loads(line) for line in (first.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/success_at_end" in r] == [1500, 3000, 4500]
    fractions = [r["rfcl/start_fraction_mean"] for r in rows if "rfcl/start_fraction_mean" in r]
    assert fractions[-1] < fractions[0]  # the starts moved back along the demos
    per_demo = [r for r in rows if "rfcl/start_fraction/demo_1" in r]
    assert per_demo and (first.run_dir / "curriculum.png").read_bytes()[:4] == b"\x89PNG"


def test_several_envs_in_workers_run_as_in_this_process(tmp_path, demo_file):
    """Three envs, each with its own episode: in two worker processes the run is the one made
    with the envs here (same curriculum, same evaluations). 1000 steps are 333 rounds of 3 and
    a last round counted up to 1000."""
    rows = []
    for workers in (0, 2):
        result = train_rfcl(_config(tmp_path, demo_file, steps=1000, warmstart_steps=300,
                                    eval_interval=500, checkpoint_interval=500, envs=3,
                                    env_workers=workers, name=f"w{workers}"))  # fmt: skip
        assert result.steps == 1000
        stored = ReplayBuffer.load(latest_checkpoint(result.run_dir) / "online.npz")
        assert len(stored) == 1000  # (not the last round's third step)
        lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
        rows.append([json.loads(line) for line in lines])
    for a, b in zip(*rows, strict=True):
        assert a["step"] == b["step"]
        for key in a.keys() & {"rfcl/start_fraction_mean", "rfcl/episodes", "eval/success_at_end",
                               "train/critic_loss"}:  # fmt: skip
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    assert [r["step"] for r in rows[0] if "eval/success_at_end" in r] == [500, 1000]
    episodes = [r["rfcl/episodes"] for r in rows[0] if "rfcl/episodes" in r]
    assert episodes[-1] > 3  # (episodes ended and began again in every env)


def test_updates_wait_for_the_warm_start_and_again_when_stage_two_begins(tmp_path, demo_file):
    """The fresh stage-2 online buffer fills with `warmstart_steps` of the policy's steps before
    it makes half of any batch; the baselines (stage 2 from the start) wait once."""
    config = _config(tmp_path, demo_file, warmstart_steps=500, update_every=2)
    run = RFCLRun(config, tmp_path)
    assert [run.updates_due(s) for s in (500, 501, 502)] == [False, False, True]
    run.step = 3000
    run.begin_stage2()
    assert not any(run.updates_due(s) for s in range(3001, 3501))
    assert run.updates_due(3502) and not run.updates_due(3503)
    run.close()
    baseline = RFCLRun(dataclasses.replace(config, reverse_curriculum=False), tmp_path)
    assert [baseline.updates_due(s) for s in (500, 502)] == [False, True]
    baseline.close()


def test_forward_seeds_are_scored_by_a_success_at_any_step_reverse_starts_by_the_last(
    tmp_path, demo_file, monkeypatch
):
    """Every episode succeeds at its first step and at no other (a fake success flag): the
    forward curriculum scores its seeds as succeeded, as the reference implementation does
    (by return), while no reverse frontier moves, as none succeeded at its last step."""
    from prefrl.demos import rfcl

    fresh = set()  # ids of envs whose episode has not stepped yet
    start_from, step = rfcl._start_from, rfcl._step

    def start_and_mark(env, seed, state):
        fresh.add(id(env))
        return start_from(env, seed, state)

    def step_first_succeeds(env, action):
        next_obs, truncated, _ = step(env, action)
        success = id(env) in fresh
        fresh.discard(id(env))
        return next_obs, truncated, success

    monkeypatch.setattr(rfcl, "_start_from", start_and_mark)
    monkeypatch.setattr(rfcl, "_step", step_first_succeeds)
    for name, changes in (("fwd", {"reverse_curriculum": False}), ("rev", {})):
        result = train_rfcl(_config(tmp_path, demo_file, steps=1500, warmstart_steps=1500,
                                    eval_interval=1500, name=name, **changes))  # fmt: skip
        loop = json.loads((latest_checkpoint(result.run_dir) / "loop.json").read_text())
        if name == "fwd":
            played = [h for h in loop["forward"]["history"] if h]
            # (a seed that succeeded once is drawn first again until 4 of its 5 succeed: few
            # seeds are played in a short run)
            assert len(played) >= 2 and all(all(h) for h in played)
        else:
            frontier = loop["reverse"]["frontier"]
            assert loop["stage"] == 1 and frontier == _last_states(tmp_path, demo_file)
            assert loop["forward"]["episodes"] == 0 and loop["reverse"]["successes"] == [0, 0]


def _maze():
    from prefrl.envs import make_env

    return make_env("toy:maze")


def test_a_seeded_short_run_learns_the_open_maze_from_one_demo(tmp_path):
    """One scripted demo, 10000 steps: stage 1 walks the start back to the demo's first state
    and succeeds from there, stage 2 begins, and the task's own start states are solved (1.0 for seeds 0 and 1 when
    written; the bar is lower, for other CPUs' float differences)."""
    demos = tmp_path / "demos"
    script_demos("toy:maze-open", 1, seed=0).save(demos)
    sac = dataclasses.replace(SMALL, hidden_dims=(64, 64), batch_size=128)
    result = train_rfcl(_config(tmp_path, demos, env="toy:maze-open", steps=10000,
                                eval_interval=10000, eval_episodes=10, checkpoint_interval=10000,
                                sac=sac))  # fmt: skip
    assert result.details["demos_solved"] == 1 and result.details["stage"] == 2
    assert result.final_eval.success_rate >= 0.7
    solved, stage2 = curriculum_events(read_metrics(result.run_dir))  # (curriculum.png's marks)
    assert list(solved) == [0] and stage2 is not None and solved[0] <= stage2


def test_actions_bounded_by_the_demos_largest(tmp_path, demo_file, gentle_demos):
    """--demo-action-scale: the agent's [-1, 1] maps to `scale` x the demos' largest action per
    dimension (capped at the env's 1); demo transitions are stored in the agent's units."""
    run = RFCLRun(_config(tmp_path, gentle_demos, demo_action_scale=1.25), tmp_path)
    np.testing.assert_allclose(run.bound, [0.5, 0.25], rtol=1e-6)
    first = run.demos.demos[0]
    stored = run.offline.action[: len(run.offline)]
    assert np.abs(stored).max() == pytest.approx(0.8)  # the demos' largest, in agent units
    np.testing.assert_allclose(run.env_action(stored[: len(first)]), first.actions, rtol=1e-5)
    obs, _, _ = run.start_episode()
    action = run.policy(obs)
    assert (np.abs(action) <= run.bound + 1e-6).all()
    run.close()
    with pytest.raises(ValueError, match=r"--demo-action-scale=0.5 is invalid: expected a mult"):
        _config(tmp_path, demo_file, demo_action_scale=0.5)
    # (--no-demo-actions: the demos' actions still bound the agent's; states alone cannot)
    states_only = RFCLRun(_config(tmp_path, gentle_demos, demo_action_scale=1.25,
                                  demo_actions=False), tmp_path / "states")  # fmt: skip
    np.testing.assert_allclose(states_only.bound, [0.5, 0.25], rtol=1e-6)
    assert states_only.offline is None
    states_only.close()
    no_actions = tmp_path / "no-actions"
    loaded = DemoSet.load(demo_file)
    DemoSet(loaded.env_id, [dataclasses.replace(d, actions=None) for d in loaded.demos]).save(
        no_actions, action_dim=2
    )
    with pytest.raises(ValueError, match="--demo-action-scale 1.25 scales the demos' largest"):
        train_rfcl(_config(tmp_path, no_actions, demo_action_scale=1.25, demo_actions=False))


def test_adroit_presets_update_as_the_papers_configs():
    """Critic and actor steps per env step: wall-time 0.5 and 0.5 (16 updates per 32 env
    steps), sample-efficient 10 and 0.5 (80 critic steps per 8 env steps, the actor every
    20th); both with 8 envs and the paper's critics."""
    from prefrl.presets import RFCL_PRESETS

    def per_env_step(name):
        c = RFCL_PRESETS[name].config
        return c.sac.utd_ratio / c.update_every, 1 / c.update_every, c.envs, c.sac.num_critics

    assert per_env_step("rfcl-adroit") == (0.5, 0.5, 8, 10)
    assert per_env_step("rfcl-adroit-sample-efficient") == (10.0, 0.5, 8, 10)
    assert RFCL_PRESETS["rfcl-adroit"].config.sac.hidden_dims == (256, 256, 256)


def test_adroit_time_limits_fit_the_demos_each_preset_is_for():
    """The paper's presets keep its 16 + steps left // 3 (human demos); the CPU preset, made
    for planned demos as fast as a trained policy, gives 16 + all the steps left."""
    from prefrl.presets import RFCL_PRESETS

    divisors = {name: p.config.reverse_time_divisor for name, p in RFCL_PRESETS.items()}
    assert divisors["rfcl-adroit"] == divisors["rfcl-adroit-sample-efficient"] == 3
    assert divisors["rfcl-adroit-cpu"] == 1


def test_an_rfcl_policy_loads_like_any_other(tmp_path, gentle_demos):
    """`load_policy` (prefrl eval, demos record) takes an RFCL run, with the action bound of
    --demo-action-scale: saved in the checkpoint, or read again from the demos (checkpoints
    from before it was saved)."""
    from prefrl.rl.compare import compare_policies
    from prefrl.training.policies import load_policy

    result = train_rfcl(_config(tmp_path, gentle_demos, steps=800, eval_interval=800,
                                checkpoint_interval=800, demo_action_scale=1.25))  # fmt: skip
    policy = load_policy(result.run_dir)
    assert isinstance(policy.config, RFCLConfig) and policy.config.demo_action_scale == 1.25
    np.testing.assert_allclose(policy.action_scale, [0.5, 0.25], rtol=1e-6)
    obs = np.random.default_rng(0).normal(size=(64, 7)).astype(np.float32)
    actions = policy(obs)
    assert (np.abs(actions) <= policy.action_scale + 1e-6).all()
    assert np.abs(actions[:, 1]).max() > 0.25 * 0.05  # (the policy does act, scaled)
    with pytest.raises(TypeError, match="acts in actions scaled by --demo-action-scale"):
        policy.sac  # noqa: B018 (CPL and datasets need the env's own actions)

    ckpt = policy.checkpoint
    loop = json.loads((ckpt / "loop.json").read_text())
    del loop["action_bound"]
    (ckpt / "loop.json").write_text(json.dumps(loop))
    np.testing.assert_allclose(load_policy(ckpt).action_scale, [0.5, 0.25], rtol=1e-6)

    compared = compare_policies([ckpt], episodes=2)
    assert compared.env_id == "toy:maze" and len(compared.results[0].success) == 2
    # Its best-evaluated policy (here its only evaluation's) loads with the same bound.
    best = load_policy(result.run_dir / "best")
    assert result.best_eval.step == 800 and result.best_eval.path == result.run_dir / "best"
    np.testing.assert_allclose(best.action_scale, [0.5, 0.25], rtol=1e-6)
    np.testing.assert_allclose(best(obs), actions, atol=1e-6)


def test_the_benchmark_writes_a_row_per_method_from_its_sweep(tmp_path):
    """benchmarks/rfcl.py end to end on a tiny grid: runs on Ray, then reads each method's runs
    back (`sac+demos` runs in a directory named `sac-demos`) into the results file. Its finished
    runs are kept: with the run directories gone (a new machine), it restores them, trains
    nothing and writes the same rows; it refuses to mix demos made with another --settle.
    tools/rfcl_holding.py plays the runs' policies."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    out = tmp_path / "rfcl.json"
    command = [
        sys.executable, "benchmarks/rfcl.py", "--env", "toy:maze-open", "--steps", "1000",
        "--seeds", "0", "--hidden", "16", "16", "--eval-episodes", "2", "--solved-share", "0.5",
        "--runs", str(tmp_path / "bench"), "--out", str(out), "--keep", str(tmp_path / "kept"),
    ]  # fmt: skip
    subprocess.run(command, cwd=root, check=True, capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["results"]
    assert [r["method"] for r in rows] == ["rfcl", "sac+demos", "sac"]
    assert all(r["env"] == "toy:maze-open" and r["env_steps"] == 1000 for r in rows)
    assert all(0 <= r["success_mean"] <= 1 and len(r["per_seed"]) == 1 for r in rows)
    for r in rows:  # (1000 steps, an evaluation every 1000: the last evaluation is the only one)
        assert r["last_evaluations"] == 5 and r["success_last_evaluations_mean"] == r["per_seed"][0]
    sys.path.insert(0, "benchmarks")
    try:
        from rfcl import evaluations, success_over_last
    finally:
        sys.path.remove("benchmarks")
    run = tmp_path / "seven-evaluations"
    run.mkdir()
    lines = [{"step": 1000 * i, "eval/success_at_end": i / 10} for i in range(1, 8)]
    lines.insert(3, {"step": 3500, "train/actor_loss": 0.0})  # (other metrics are passed over)
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert success_over_last(evaluations(run)) == pytest.approx((0.3 + 0.4 + 0.5 + 0.6 + 0.7) / 5)
    assert all(r["solved_share"] == 0.5 and r["demo_source"] == "scripted" for r in rows)
    stored = json.loads((tmp_path / "bench/runs/toy-maze-open_rfcl_d1_s0/config.json").read_text())
    assert stored["solved_share"] == 0.5
    for figure in ("rfcl_toy-maze-open.png", "rfcl_toy-maze-open_curriculum.png"):
        assert (tmp_path / figure).read_bytes()[:4] == b"\x89PNG"

    kept = sorted(p.name for p in (tmp_path / "kept/bench").iterdir())
    assert kept == [f"toy-maze-open_{m}_d1_s0" for m in ("rfcl", "sac-demos", "sac")]
    holding = subprocess.run(
        [sys.executable, "tools/rfcl_holding.py", "--episodes", "2",
         *(str(tmp_path / "bench/runs" / name) for name in kept)],
        cwd=root, check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = holding.stdout.splitlines()
    assert [line.split(" ")[0] for line in lines] == kept
    assert all(re.search(r"reached [0-2]/2, at the last step [0-2]/2", line) for line in lines)
    shutil.rmtree(tmp_path / "bench/runs")
    again = subprocess.run(command, cwd=root, check=True, capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    assert "3 runs finished (skipped); 0 runs to go" in again.stdout
    assert json.loads(out.read_text())["results"] == rows
    other = subprocess.run([*command, "--settle", "5"], check=False, cwd=root,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert other.returncode != 0 and "made with --settle 0, not 5: move it aside" in other.stderr


def test_the_benchmark_takes_demos_from_a_folder_of_yours(tmp_path):
    """benchmarks/rfcl.py --demos-from: the first --demos of a demo folder (here "recorded",
    cut with --settle 3: the grid takes their --settle without being told), its row and run
    names saying where they came from; too few, or another env's, refused."""
    import subprocess
    import sys

    from prefrl.data.demos import DemoSet
    from prefrl.demos.make import script_demos

    root = Path(__file__).parent.parent
    made = script_demos("toy:maze-open", 2)
    DemoSet(made.env_id, made.demos, {"source": "recorded", "settle": 3}).save(tmp_path / "mine")
    out = tmp_path / "rfcl.json"

    def bench(demos: int, env: str = "toy:maze-open") -> subprocess.CompletedProcess:
        return subprocess.run([
            sys.executable, "benchmarks/rfcl.py", "--env", env, "--demos-from",
            str(tmp_path / "mine"), "--demos", str(demos), "--methods", "rfcl", "--steps", "1000",
            "--seeds", "0", "--hidden", "16", "16", "--eval-episodes", "1", "--runs",
            str(tmp_path / "bench"), "--out", str(out), "--keep", str(tmp_path / "kept"),
        ], cwd=root, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip

    assert bench(2).returncode == 0
    (row,) = json.loads(out.read_text())["results"]
    assert row["demo_source"] == "recorded" and row["demos"] == 2
    assert (tmp_path / "bench/runs/toy-maze-open_rfcl_d2-mine_s0").is_dir()
    assert "needs at least that many" in bench(3).stderr
    assert "2 demos of toy:maze-open; --env toy:maze" in bench(2, "toy:maze").stderr


def test_the_benchmark_runs_from_peoples_demos_beside_the_planned_rows(tmp_path):
    """benchmarks/rfcl.py --dapg: the demos come from a hand_dapg pickle, replayed; its row says
    so, and a planned-demo row of the same env stays; with --demo-action-scale, the row and the
    names say the bound; --methods rfcl replaces the rfcl row and leaves the other methods'.
    More demos than replay is refused, and a bound under 1 before any demos are made.
    tools/rfcl_holding.py measures how fast the demos swing the door."""
    import pickle
    import subprocess
    import sys

    from conftest import dapg_door_demos

    root = Path(__file__).parent.parent
    (tmp_path / "door.pickle").write_bytes(pickle.dumps(dapg_door_demos()))
    out = tmp_path / "rfcl.json"
    planned = {"device": "cpu", "env": "adroit:door", "method": "rfcl", "demo_source": "planned"}
    people = {**planned, "demo_source": "dapg-human", "demo_action_scale": 1.25}
    stale, sac = {**people, "success_mean": -1.0}, {**people, "method": "sac"}
    out.write_text(json.dumps({"results": [planned, stale, sac]}))

    def bench(demos: int, runs: str, scale: str = "1.25") -> list[str]:
        return [
            sys.executable, "benchmarks/rfcl.py", "--env", "adroit:door", "--dapg",
            str(tmp_path / "door.pickle"), "--demos", str(demos), "--methods", "rfcl", "--steps",
            "1000", "--seeds", "0", "--hidden", "16", "16", "--eval-episodes", "1",
            "--demo-action-scale", scale, "--runs", str(tmp_path / runs), "--out", str(out),
            "--keep", str(tmp_path / "kept"),
        ]  # fmt: skip

    subprocess.run(bench(1, "bench"), cwd=root, check=True, capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["results"]
    # (the stale rfcl row replaced in place; the other method's row of the grid left)
    assert [(r["method"], r["demo_source"], r["demo_action_scale"]) for r in rows] == [
        ("rfcl", "planned", None),
        ("rfcl", "dapg-human", 1.25),
        ("sac", "dapg-human", 1.25),
    ]
    assert rows[1]["success_mean"] >= 0 and rows[1]["env_steps"] == 1000
    assert list(rows[0]) == [k for k in rows[1] if k in rows[0]]  # (the page's columns line up)
    assert (tmp_path / "bench/runs/adroit-door_rfcl_d1-dapg-as1.25_s0").is_dir()
    assert (tmp_path / "rfcl_adroit-door-dapg-as1.25.png").read_bytes()[:4] == b"\x89PNG"
    swings = subprocess.run(
        [sys.executable, "tools/rfcl_holding.py", "--door-demos",
         str(tmp_path / "bench/demos-adroit-door-1-dapg")],
        cwd=root, check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    # (the fake demo's door starts at 1.45 rad and stays: at rest, not swung)
    assert re.search(r"demo 0: the hinge's peak speed 0\.\d rad/s, 1\.4\d rad at the end$",
                     swings.stdout.strip())  # fmt: skip
    refused = subprocess.run(bench(2, "other"), cwd=root, check=False, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
    assert refused.returncode != 0 and "--demos 2: " in refused.stderr
    assert "has 1 that succeed when replayed here" in refused.stderr
    unbounded = subprocess.run(bench(1, "shrunk", scale="0.5"), cwd=root, check=False,
                               capture_output=True, text=True, timeout=600)  # fmt: skip
    assert unbounded.returncode != 0 and "--demo-action-scale=0.5 is invalid" in unbounded.stderr
    assert not (tmp_path / "shrunk").exists()  # (refused before any demos were made)


def _stepped_demo(env_id: str):
    """A demo of `env_id` from random actions, its stored flags all success (what a file of
    another tool could hold): the checks must find out for themselves."""
    from prefrl.data.demos import Demo
    from prefrl.envs import make_env

    env = make_env(env_id, seed=0)
    state = env.get_state if env.restores_state else lambda: np.zeros(3)  # (states from elsewhere)
    obs, _ = env.reset(seed=0)
    states, observations, actions = [state()], [obs], []
    for action in np.random.default_rng(0).uniform(-1, 1, (20, env.action_dim)):
        obs, *_ = env.step(action.astype(np.float32))
        states.append(state())
        observations.append(obs)
        actions.append(action)
    env.close()
    return DemoSet(env_id, [Demo(np.stack(states), np.stack(observations),
                                 np.stack(actions).astype(np.float32), np.zeros(20),
                                 np.ones(20, bool), {"source": "test"})])  # fmt: skip


@pytest.mark.parametrize(("env_id", "message"), [
    ("toy:point-reach", "reports no success flag"),
    ("tests.user_envs:Slider-v0", "cannot restore a saved state: RFCL starts episodes from demo"),
])  # fmt: skip
def test_an_env_without_success_or_restore_is_refused_before_a_run(tmp_path, env_id, message):
    _stepped_demo(env_id).save(tmp_path / "demos")
    with pytest.raises(ValueError, match=message):
        train_rfcl(_config(tmp_path, tmp_path / "demos", env=env_id))
    assert not (tmp_path / "runs").exists()


def test_cli_rfcl_prints_its_summary_and_refuses_bad_demos(tmp_path, demo_file, capsys,
                                                            monkeypatch):  # fmt: skip
    """...and stores the demos' path whole, so that the run resumes from any folder."""
    from prefrl.cli import main

    monkeypatch.chdir(demo_file.parent)
    code = main(["rfcl", "--demos", demo_file.name, "--steps", "600", "--warmstart-steps", "200",
                 "--eval-interval", "600", "--eval-episodes", "2", "--sac.hidden-dims", "16", "16",
                 "--runs-dir", str(tmp_path), "--name", "cli", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "RFCL on toy:maze after 600 steps: success 0." in out and " over 2 episodes; " in out
    assert "\nstage 1, demos solved 0/2; on the task's initial states: success at the end" in out
    assert "curriculum.png" in out and (tmp_path / "cli" / "curriculum.png").exists()
    stored = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert Path(stored["demos"]) == demo_file.absolute()
    code = main(["rfcl", "--demos", str(demo_file), "--env", "toy:maze-open",
                 "--runs-dir", str(tmp_path), "--name", "bad"])  # fmt: skip
    assert code == 2 and "holds demos of toy:maze, not of toy:maze-open" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    code = main(["rfcl", "--demos", "nowhere", "--runs-dir", str(tmp_path), "--name", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "error: --demos: " in err and "nowhere does not exist; make demos" in err
    code = main(["rfcl", "--demos", demo_file.name, "--steps", "100", "--warmstart-steps", "200",
                 "--eval-episodes", "1", "--sac.hidden-dims", "16", "16", "--runs-dir",
                 str(tmp_path), "--name", "short", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "--steps 100 ends within the --warmstart-steps 200" in out


def test_a_baseline_run_is_named_for_the_method_it_runs(tmp_path, demo_file, capsys,
                                                       monkeypatch):  # fmt: skip
    """--no-reverse-curriculum --no-forward-curriculum runs SAC + demos: its title, progress and
    summary say so, with no stage and no curriculum figure; its learning curve (as RFCL's)
    draws the success at the end and at any step, and says what the band is."""
    from prefrl.cli import main
    from prefrl.demos.rfcl_config import method_name, method_slug
    from prefrl.rundir import plots

    drawn = {}
    save = plots._save

    def keep(fig, path):
        drawn[path.name] = fig.axes[0]
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    code = main(["rfcl", "--demos", str(demo_file), "--steps", "600", "--warmstart-steps", "200",
                 "--eval-interval", "300", "--eval-episodes", "2", "--sac.hidden-dims", "16",
                 "16", "--runs-dir", str(tmp_path), "--name", "base", "--no-reverse-curriculum",
                 "--no-forward-curriculum"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "stage" not in out and "demos solved" not in out
    assert "SAC + demos on toy:maze after 600 steps: success 0." in out
    assert "\non the task's initial states: success at the end " in out
    assert not (tmp_path / "base" / "curriculum.png").exists() and "curriculum.png" not in out
    assert not any(k.startswith("rfcl/start_fraction") for r in read_metrics(tmp_path / "base")
                   for k in r)  # fmt: skip
    curve = drawn["learning_curve.png"]
    assert curve.get_title() == "SAC + demos on toy:maze"
    legend = [t.get_text() for t in curve.get_legend().get_texts()]
    assert sorted(legend) == ["at any step", "at the end of an episode",
                              "at the end: ± 1 std over the evaluation episodes (each 0 or 1)"]  # fmt: skip
    assert [len(line.get_xdata()) for line in curve.get_lines()] == [2, 2]  # (steps 300, 600)
    names = {(r, f, a): method_name(_config(tmp_path, demo_file, reverse_curriculum=r,
                                            forward_curriculum=f, demo_actions=a))
             for r in (True, False) for f in (True, False) for a in (True, False)}  # fmt: skip
    assert names[True, True, True] == "RFCL" and names[False, False, False] == "SAC"
    assert names[False, True, True] == "SAC + demos + forward curriculum"
    assert len(set(names.values())) == 8
    # Run directories are named for the method too (a baseline's was named rfcl).
    slugs = {(r, a): method_slug(_config(tmp_path, demo_file, reverse_curriculum=r,
                                         forward_curriculum=False, demo_actions=a))
             for r in (True, False) for a in (True, False)}  # fmt: skip
    assert slugs == {(True, True): "rfcl", (True, False): "rfcl", (False, True): "sac-demos",
                     (False, False): "sac"}  # fmt: skip
