"""Sweeps on a real local Ray: tiny runs, their results table and curves, failures reported, a
sweep stopped and started again, and the bad input refused before any run starts."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import PREFRL_WITH_CTRL_C, free_port

from prefrl.cli.sweep import build_configs
from prefrl.offline.learner import OfflineConfig
from prefrl.rl.config import RLConfig
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.provenance import read_sessions
from prefrl.sweep import grid, run_sweep
from prefrl.sweep.runner import DONE_FILE, connect_ray, sweep_lock

ray = pytest.importorskip("ray")


def tiny(steps: int = 300, **kw) -> RLConfig:
    return RLConfig(env="toy:point-reach", steps=steps, warmstart_steps=100, eval_interval=100,
                    eval_episodes=1, checkpoint_interval=100, keep_checkpoints=0, video=False,
                    **kw)  # fmt: skip


@pytest.fixture(scope="module")
def local_ray():
    connect_ray(None, num_cpus=2)
    yield
    ray.shutdown()


def test_a_grid_over_seeds_gives_a_table_of_means_and_curves_and_skips_finished_runs(
    tmp_path, local_ray
):
    configs = grid(tiny(), {"sac.batch_size": [32, 64]})
    assert list(configs) == ["sac.batch_size=32", "sac.batch_size=64"]
    result = run_sweep(configs, seeds=[0, 1], directory=tmp_path / "sw", progress=False)
    assert result.complete and [o.status for o in result.outcomes] == ["done"] * 4
    runs = tmp_path / "sw" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [
        "sac.batch_size-32_s0", "sac.batch_size-32_s1", "sac.batch_size-64_s0",
        "sac.batch_size-64_s1",
    ]  # fmt: skip
    assert result.run_dir("sac.batch_size=64", 1) == runs / "sac.batch_size-64_s1"
    config = json.loads((runs / "sac.batch_size-64_s1" / "config.json").read_text())
    assert config["seed"] == 1 and config["sac"]["batch_size"] == 64
    # The table's mean and std are those of the runs' last evaluations.
    finals = [
        [r["eval/return_mean"] for r in read_metrics(runs / f"sac.batch_size-32_s{s}")
         if "eval/return_mean" in r][-1]
        for s in (0, 1)
    ]  # fmt: skip
    row = result.table["configs"]["sac.batch_size-32"]["metrics"]["eval/return_mean"]
    assert row["values"] == pytest.approx(finals)
    assert row["mean"] == pytest.approx(np.mean(finals))
    assert row["std"] == pytest.approx(np.std(finals, ddof=1))
    saved = json.loads((tmp_path / "sw" / "results.json").read_text())
    assert saved["configs"]["sac.batch_size-64"]["seeds"] == [0, 1] and saved["failed"] == []
    assert "| sac.batch_size-32 | 2 |" in (tmp_path / "sw" / "results.md").read_text()
    assert (tmp_path / "sw" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    # Each run had a fresh worker (two at a time here): none imported prefrl for an earlier run.
    pids = {read_sessions(runs / name)[0]["pid"] for name in os.listdir(runs)}
    assert len(pids) == 4
    # Started again: nothing runs again.
    sessions = (runs / "sac.batch_size-32_s0" / "sessions.jsonl").read_text()
    again = run_sweep(configs, seeds=[0, 1], directory=tmp_path / "sw", progress=False)
    assert [o.status for o in again.outcomes] == ["finished"] * 4
    assert (runs / "sac.batch_size-32_s0" / "sessions.jsonl").read_text() == sessions
    # The same directory with another config under a run's name is refused.
    with pytest.raises(ValueError, match=r"another config \(steps: 300 there, 200 now\)"):
        run_sweep(grid(tiny(steps=200), {"sac.batch_size": [32]}), seeds=[0],
                  directory=tmp_path / "sw", progress=False)  # fmt: skip
    # A field that prefrl added since the sweep was made (absent from its manifest) is no change.
    manifest = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    for spec in manifest["runs"].values():
        del spec["config"]["sac"]["batch_size"], spec["config"]["video_interval"]
    (tmp_path / "sw" / "sweep.json").write_text(json.dumps(manifest))
    again = run_sweep(configs, seeds=[0, 1], directory=tmp_path / "sw", progress=False)
    assert [o.status for o in again.outcomes] == ["finished"] * 4


def test_a_failing_run_is_reported_with_its_error_and_the_others_finish(tmp_path, local_ray):
    bad = OfflineConfig(dataset=str(tmp_path / "missing.npz"), steps=1000, eval_interval=1000,
                        checkpoint_interval=1000)  # fmt: skip
    configs = {"good": tiny(steps=200), "bad": bad}
    result = run_sweep(configs, seeds=[0], directory=tmp_path / "sw", progress=False)
    status = {o.name: o for o in result.outcomes}
    assert status["good_s0"].status == "done" and status["bad_s0"].status == "failed"
    assert "missing.npz" in status["bad_s0"].error and not result.complete
    assert result.table["failed"][0]["run"] == "bad_s0"
    assert "failed: bad_s0" in (tmp_path / "sw" / "results.md").read_text()
    assert not (tmp_path / "sw" / "runs" / "bad_s0" / DONE_FILE).exists()


def test_cpl_runs_sweep_and_a_stopped_one_starts_again(tmp_path, local_ray):
    """offline-cpl (no presets, no resume: minutes long) through the CLI's grid; a run stopped
    after its end-of-run checkpoint but before it was marked finished starts again afresh."""
    from test_offline import synthetic

    from prefrl.feedback.dataset_queries import label_queries, sample_queries
    from prefrl.feedback.teachers import TeacherConfig

    data = synthetic(n_episodes=10, length=30, obs_dim=6)
    data.save(tmp_path / "ds")
    queries = sample_queries(data, 40, length=5, seed=0)
    label_queries(queries, data, TeacherConfig("oracle")).save(tmp_path / "q.json")
    base = ["--dataset", str(tmp_path / "ds"), "--labels", str(tmp_path / "q.json"),
            "--hidden-dims", "16", "--bc-steps", "50", "--steps", "20", "--eval-episodes", "1"]  # fmt: skip
    configs = build_configs("offline-cpl", base, ["cpl.conservative_weight=0.1,0.0"], [])
    assert sorted(configs) == ["cpl.conservative_weight=0.0", "cpl.conservative_weight=0.1"]
    result = run_sweep(configs, seeds=[0], directory=tmp_path / "sw", progress=False)
    assert result.complete, [o.error for o in result.outcomes]
    row = result.table["configs"]["cpl.conservative_weight-0.1"]["metrics"]
    assert np.isfinite(row["eval/score_mean"]["mean"]) and "eval/bc_score_mean" in row
    assert 0 <= row["cpl/val_accuracy"]["mean"] <= 1  # (CPL's own fit is reported too)
    assert row["eval/score_mean"]["std"] is None  # (one seed: no spread)
    run = tmp_path / "sw" / "runs" / "cpl.conservative_weight-0.1_s0"
    (run / DONE_FILE).unlink()  # stopped between its last checkpoint and being marked done
    again = run_sweep(configs, seeds=[0], directory=tmp_path / "sw", progress=False)
    assert sorted(o.status for o in again.outcomes) == ["done", "finished"]
    assert len((run / "sessions.jsonl").read_text().splitlines()) == 1  # started afresh
    steps = [r["step"] for r in read_metrics(run) if "eval/score_mean" in r]
    assert steps == [70]  # (50 BC + 20 CPL steps, evaluated once: not twice over)


def test_bad_input_fails_before_any_run_starts(tmp_path):
    with pytest.raises(ValueError, match="RLConfig has no field 'sac.batch_sise'"):
        grid(tiny(), {"sac.batch_sise": [32]})
    with pytest.raises(ValueError, match=r"sac.batch_size=-4.*batch_size"):
        grid(tiny(), {"sac.batch_size": [-4]})
    with pytest.raises(ValueError, match="RLConfig has no field 'stepz'"):
        build_configs("rl", [], ["stepz=1,2"], [])
    with pytest.raises(ValueError, match="the flags .*--steps -3 are invalid for prefrl rl"):
        build_configs("rl", ["--env", "toy:point-reach"], ["steps=10,-3"], [])
    with pytest.raises(ValueError, match="expected one of train, rl"):
        build_configs("serve", [], [], [])
    with pytest.raises(ValueError, match="expected distinct integers"):
        run_sweep({"a": tiny()}, seeds=[0, 0], directory=tmp_path / "x", progress=False)
    with pytest.raises(ConnectionError, match="cannot reach the Ray cluster at '127.0.0.1:1'"):
        connect_ray("127.0.0.1:1")
    with pytest.raises(ConnectionError, match="cannot reach the Ray cluster"):
        run_sweep({"a": tiny()}, seeds=[0], directory=tmp_path / "y", address="127.0.0.1:1")
    assert not (tmp_path / "y").exists()  # (nothing written)
    assert not (tmp_path / "x" / "runs").exists()
    # One sweep at a time in a directory.
    with sweep_lock(tmp_path / "locked"), pytest.raises(FileExistsError, match="another sweep"):
        run_sweep({"a": tiny()}, seeds=[0], directory=tmp_path / "locked", progress=False)


def test_a_ray_that_starts_too_slowly_is_tried_again_then_said_plainly(monkeypatch):
    """Ray's own node can time out while starting on a busy machine (it happened beside three
    training runs on 2 cores): the sweep tries once more, then says so and what to do."""
    calls = []

    def slow_init(**kwargs):
        calls.append(kwargs["address"])
        if len(calls) <= failures:
            raise Exception("The current node timed out during startup. ...")  # noqa: TRY002 (as Ray)

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", slow_init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    failures = 1
    assert connect_ray(None, num_cpus=1) is ray and calls == ["local", "local"]
    calls.clear()
    failures = 2
    with pytest.raises(ConnectionError, match="did not start in time, twice.*--address auto"):
        connect_ray(None, num_cpus=1)
    assert calls == ["local", "local"]


def _sweep_command(directory: Path) -> list[str]:
    """`prefrl sweep` of one run long enough to be stopped after its first checkpoint."""
    return [*PREFRL_WITH_CTRL_C, "sweep", "rl", "--seeds", "0", "--dir", str(directory),
            "--num-cpus", "1", "--", "--env", "toy:point-reach", "--steps", "3000",
            "--warmstart-steps", "100", "--eval-interval", "500", "--eval-episodes", "1",
            "--checkpoint-interval", "200", "--keep-checkpoints", "0", "--no-video"]  # fmt: skip


def _start_until_checkpoint(cmd: list[str], run: Path, env: dict) -> subprocess.Popen:
    sweep = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while not list(run.glob("checkpoints/step_*")):
        assert sweep.poll() is None, sweep.stdout.read()
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.5)
    return sweep


def test_a_stopped_sweep_resumes_its_runs_from_their_checkpoints(tmp_path):
    """The command line, as people use it: Ctrl-C mid-run, then the same command again."""
    directory = tmp_path / "sw"
    cmd = _sweep_command(directory)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = directory / "runs" / "rl_s0"
    first = _start_until_checkpoint(cmd, run, env)
    first.send_signal(signal.SIGINT)
    out = first.communicate(timeout=400)[0]
    assert first.returncode == 130, out
    assert "start the same sweep again" in out and not (run / DONE_FILE).exists()
    # The run was stopped as Ctrl-C stops it alone: a checkpoint where it stopped, not lost steps.
    stopped = re.search(r"rl_s0 stopped at step ([\d,]+), checkpointed", out)
    assert stopped, out
    assert (run / "checkpoints" / f"step_{int(stopped[1].replace(',', '')):09d}").is_dir()
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600,
                            check=False)  # fmt: skip
    assert second.returncode == 0, second.stdout + second.stderr
    assert (run / DONE_FILE).exists()
    sessions = [json.loads(x) for x in (run / "sessions.jsonl").read_text().splitlines()]
    assert len(sessions) == 2  # the first, stopped, and the one that resumed it
    steps = [r["step"] for r in read_metrics(run) if "eval/return_mean" in r]
    assert steps[-1] == 3000 and len(steps) == len(set(steps))
    assert "| rl | 1 |" in second.stdout
    assert (
        "0 runs finished (skipped); 1 run to go (resuming from a checkpoint: 1, starting over: 0)"
        in second.stdout
    )


def test_runs_keep_the_niceness_of_the_command_that_started_them(local_ray):
    """Ray's workers would run 15 nicer than the sweep (nice 19 under a nice 4 shell): on a busy
    machine its runs made no progress for minutes."""

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)


@pytest.fixture
def someones_ray_cluster():
    """A Ray cluster that someone's `ray start --head` runs on this machine, RAY_ADDRESS pointing
    at it (its own temp dir: nothing else here finds it); stopped at the end."""
    port = free_port()
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # (Ray's socket paths are short)
    log = open(temp / "ray_start.log", "w")  # noqa: SIM115
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={port}", "--block",
         f"--temp-dir={temp}", "--num-cpus=1", "--include-dashboard=false",
         "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (temp / "ray_current_cluster").exists():  # (written once it is up)
            assert head.poll() is None, (temp / "ray_start.log").read_text()
            assert time.monotonic() < deadline, "ray start --head not up within 300 s"
            time.sleep(0.5)
        yield temp, f"127.0.0.1:{port}"
    finally:
        # SIGTERM to `ray start` alone: it drains its node through its GCS and ends it all in a
        # few seconds (the whole group at once took its GCS first, and it waited 30 s for it);
        # then SIGKILL to the group, for anything left.
        head.terminate()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)  # (the group: its GCS, raylet and workers too)
        head.wait(10)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_sweep_runs_on_its_own_ray_beside_a_running_cluster_and_sigterm_stops_it(
    tmp_path, someones_ray_cluster
):
    """Without --address a sweep starts its own Ray (with --num-cpus), not joining the cluster
    that RAY_ADDRESS names; SIGTERM stops it as Ctrl-C does, without Ray's crash dump."""
    temp, address = someones_ray_cluster
    directory = tmp_path / "sw"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_ADDRESS": address}
    run = directory / "runs" / "rl_s0"
    sweep = _start_until_checkpoint(_sweep_command(directory), run, env)
    sweep.send_signal(signal.SIGTERM)
    out = sweep.communicate(timeout=120)[0]
    assert sweep.returncode == 130, out
    assert "stopped; start the same sweep again to resume it" in out
    assert "SIGTERM received" not in out and not (run / DONE_FILE).exists()
    assert not list(temp.glob("session_*/logs/python-core-driver-*"))  # (nobody joined it)


def test_a_benchmark_grid_keeps_each_run_as_it_finishes(tmp_path):
    """benchmarks/sweep_grid.py: while a grid runs, a run that finishes is kept within the
    keeper's interval, before the grid ends (a session can end between the two); a run still
    going is not kept."""
    import threading

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import sweep_grid as bench

    runs, keep = tmp_path / "bench", tmp_path / "kept"
    for name in ("a_s0", "b_s0"):
        (runs / "runs" / name).mkdir(parents=True)
        (runs / "runs" / name / "metrics.jsonl").write_text('{"step": 1}\n')
    stop = threading.Event()
    keeper = threading.Thread(target=bench.keep_while_running,
                              args=(runs, keep, ["a_s0", "b_s0"], stop, 0.05))  # fmt: skip
    keeper.start()
    try:
        (runs / "runs/a_s0" / bench.DONE_FILE).write_text("{}\n")
        kept = keep / "bench/a_s0" / f"{bench.DONE_FILE}.gz"
        for _ in range(200):
            if kept.exists():
                break
            threading.Event().wait(0.05)
    finally:
        stop.set()
        keeper.join(timeout=10)
    assert kept.exists() and (keep / "bench/a_s0/metrics.jsonl.gz").exists()
    assert not (keep / "bench/b_s0").exists()
