import json
import re
import time
from pathlib import Path

import pytest

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, latest_checkpoint
from prefrl.rundir.config import config_from_dict, config_to_dict
from prefrl.rundir.metrics import MetricsLogger, read_metrics, truncate_metrics
from prefrl.rundir.workers import hold_trainer


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(path, "w") as f:
        f.write("half of the new")
        raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_latest_always_names_a_complete_checkpoint(tmp_path):
    first = begin_checkpoint(tmp_path, 100)
    (first / "agent.msgpack").write_bytes(b"a")
    commit_checkpoint(first)
    assert latest_checkpoint(tmp_path).name == "step_000000100"
    # A crash while writing the next checkpoint: it never becomes `latest`.
    second = begin_checkpoint(tmp_path, 200)
    (second / "agent.msgpack").write_bytes(b"partial")
    assert latest_checkpoint(tmp_path).name == "step_000000100"
    assert (latest_checkpoint(tmp_path) / "agent.msgpack").read_bytes() == b"a"


def test_old_checkpoints_and_interrupted_writes_are_pruned(tmp_path):
    begin_checkpoint(tmp_path, 0)  # a write that never finished
    for step in range(1, 6):
        commit_checkpoint(begin_checkpoint(tmp_path, step), keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest", "step_000000004", "step_000000005"]
    # keep=0 keeps every checkpoint (`--keep-checkpoints 0`, to pick a medium policy later).
    for step in range(6, 9):
        commit_checkpoint(begin_checkpoint(tmp_path, step), keep=0)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest"] + [f"step_{s:09d}" for s in (4, 5, 6, 7, 8)]


def test_config_round_trip():
    from prefrl.agents import SACConfig
    from prefrl.rl.config import RLConfig

    config = RLConfig(env="Hopper-v5", steps=123, sac=SACConfig(hidden_dims=(64, 32), tau=0.01))
    data = json.loads(json.dumps(config_to_dict(config)))
    assert config_from_dict(RLConfig, data) == config
    with pytest.raises(ValueError, match="unknown RLConfig fields"):
        config_from_dict(RLConfig, {**data, "bogus": 1})
    # A run made before the SAC settings were named `sac` (config.json: "agent") still loads.
    old = {("agent" if k == "sac" else k): v for k, v in data.items()}
    assert config_from_dict(RLConfig, old) == config


def test_metrics_jsonl_and_tensorboard(tmp_path):
    log = MetricsLogger(tmp_path)
    for step in (10, 20, 30):
        log.log(step, {"eval/return_mean": step * 2.0})
    log.close()
    assert [r["eval/return_mean"] for r in read_metrics(tmp_path)] == [20.0, 40.0, 60.0]
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    truncate_metrics(tmp_path, 20)
    assert [r["step"] for r in read_metrics(tmp_path)] == [10, 20]


def test_learning_curve_names_its_measure_and_keeps_the_band_in_range(tmp_path, monkeypatch):
    from prefrl.rundir import plots

    log = MetricsLogger(tmp_path)
    for step, mean in ((10, 0.1), (20, 0.5), (30, 0.95)):
        log.log(step, {"eval/return_mean": mean, "eval/return_std": 0.4})
    log.close()
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig.axes[0]) or path)
    success_curve = plots.Curve("success at the end of an episode", (0, 1))
    plots.plot_learning_curve(tmp_path, curve=success_curve)
    plots.plot_learning_curve(tmp_path)
    success, returns = drawn
    assert success.get_ylabel() == "success at the end of an episode"
    band = success.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 0.0 and band.max() == 1.0  # (0.1 - 0.4 and 0.95 + 0.4, cut)
    assert success.get_ylim()[0] > -0.1 and success.get_ylim()[1] < 1.1
    assert returns.get_ylabel() == "evaluation return"
    band = returns.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() < -0.2 and band.max() > 1.3  # (unbounded: as logged)


def test_curriculum_figure_marks_solved_demos_and_stage_two(tmp_path):
    from prefrl.rundir.plots import curriculum_events, plot_curriculum

    rows = [
        (100, [1.0, 0.5], [0, 0], 1), (200, [0.0, 0.2], [0, 0], 1),
        (300, [0.0, 0.0], [1, 0], 1), (400, [0.0, 0.0], [1, 1], 2), (500, [0.0, 0.0], [1, 1], 2),
    ]  # fmt: skip
    with (tmp_path / "metrics.jsonl").open("w") as f:
        for step, starts, solved, stage in rows:
            row = {"step": step, "rfcl/stage": stage}
            row |= {f"rfcl/start_fraction/demo_{i}": x for i, x in enumerate(starts)}
            row |= {f"rfcl/solved/demo_{i}": float(x) for i, x in enumerate(solved)}
            f.write(json.dumps(row) + "\n")
        f.write(json.dumps({"step": 500, "eval/success_at_end": 1.0}) + "\n")
    # Demo 0 solved at 300 (reaching its first state at 200 is not solving it); stage 2 at 400.
    assert curriculum_events(read_metrics(tmp_path)) == ({0: 300, 1: 400}, 400)
    assert plot_curriculum(tmp_path).read_bytes()[:4] == b"\x89PNG"
    # A run of older prefrl logged no solved flags: no stars, the figure all the same.
    older = [{k: v for k, v in r.items() if "solved" not in k} for r in read_metrics(tmp_path)]
    assert curriculum_events(older) == ({}, 400)


def test_progress_prints_plain_lines_where_the_output_is_not_a_terminal(capsys, monkeypatch):
    from prefrl.rundir import progress

    with progress.TrainingProgress(1000, 0) as bar:
        bar.update(100, info="labels 20")
        assert capsys.readouterr().out == ""  # at most one line per PLAIN_EVERY_S
        monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)
        bar.update(500, last_eval=-150.25)
        bar.update(1000)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("step 500/1,000 (50%),") and "eval return -150.2" in lines[0]
    assert "labels 20" in lines[0] and lines[-1].startswith("step 1,000/1,000 (100%)")
    with progress.TrainingProgress(1000, 0, eval_label="eval success", eval_digits=2) as bar:
        bar.update(1000, last_eval=0.85)  # (RFCL's: a success rate)
    assert "steps/s, eval success 0.85" in capsys.readouterr().out


def test_no_progress_prints_plain_lines_at_the_log_interval_on_a_terminal_too(capsys, monkeypatch):
    """--no-progress turns the bar off, not the progress: plain lines at each logged step, as
    where the output is not a terminal."""
    from types import SimpleNamespace

    from prefrl.rundir import progress

    monkeypatch.setattr(progress, "Console", lambda: SimpleNamespace(is_terminal=True))
    with progress.TrainingProgress(1000, 0, enabled=False) as bar:
        bar.print_at_logs()
        bar.logged(500, 25.0)
        bar.update(1000, last_eval=3.5)
    lines = capsys.readouterr().out.splitlines()
    # (the time left at the pace so far: half the run took what the rest will)
    assert re.fullmatch(r"step 500/1,000 \(50%\), 25 steps/s, \d+:\d\d:\d\d left, eval return "
                        r"\(none yet\)", lines[0]), lines[0]  # fmt: skip
    assert lines[-1].startswith("step 1,000/1,000 (100%)") and "eval return 3.5" in lines[-1]


def test_progress_eta_counts_all_the_time_the_session_spent(monkeypatch):
    """The time left at the session's pace so far, reward fits and evaluations included (not a
    window of recent steps between them)."""
    from types import SimpleNamespace

    from prefrl.rundir import progress

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: clock.now))
    bar = progress.TrainingProgress(1000, 200, enabled=False)
    assert bar._eta(200) == "-"
    clock.now = 100.0  # (100 steps in 100 s: say 10 s of steps and a 90 s reward fit)
    assert bar._eta(300) == "0:11:40"


def test_prefrl_runs_shows_what_a_run_does_before_its_first_step(tmp_path, capsys, monkeypatch):
    """A pixel run pre-training its reward model (35 minutes or more on Pong) has logged no
    step: `prefrl runs` shows its phase, how far it is, its pace and the time left, while it
    runs; a phase file left by a run that stopped is not read."""
    from types import SimpleNamespace

    from prefrl.cli import main
    from prefrl.rundir import status

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(status, "time", SimpleNamespace(monotonic=lambda: clock.now))
    run = tmp_path / "runs" / "pong_s0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"env": "atari:Pong", "steps": 5_000_000}))
    (run / "metrics.jsonl").write_text("")

    def line() -> str:
        assert main(["runs", str(tmp_path / "runs")]) == 0
        return capsys.readouterr().out.splitlines()[1]

    lock = hold_trainer(run)
    try:
        with status.PhaseFile(
            run, "pre-training the reward model", 3000, 600, "gradient steps"
        ) as phase:
            phase.update(700)  # (not rewritten within 15 s)
            assert json.loads((run / status.PHASE_FILE).read_text())["done"] == 600
            assert "pre-training the reward model: 600/3,000 gradient steps" in line()
            clock.now = 100.0
            phase.update(800)  # 200 steps in 100 s: 2 a second, 2200 left
            shown = line()
            assert "running  pre-training the reward model: 800/3,000 gradient steps" in shown
            assert shown.endswith("2.0 gradient steps/s  0:18:20"), shown
        assert not (run / status.PHASE_FILE).exists()
        assert line().split()[1:3] == ["running", "0/5,000,000"]
    finally:
        lock.close()
    with status.PhaseFile(run, "pre-training the reward model", 3000, 600, "gradient steps"):
        assert line().split()[1:3] == ["stopped", "0/5,000,000"]
    from prefrl.rundir.progress import TrainingProgress  # (how a run's phase keeps its file)

    with TrainingProgress(3000, 0, enabled=False, eval_label=None, unit="gradient steps",
                          title="pre-training the reward model", phase_of=run):  # fmt: skip
        assert json.loads((run / status.PHASE_FILE).read_text())["total"] == 3000
    assert not (run / status.PHASE_FILE).exists()


def test_prefrl_runs_says_where_each_run_of_a_sweep_stands(tmp_path, capsys):
    """A finished run, a stopped one, one a grid kept without its config (marked done by its
    sweep) and one training now: its pace from its metrics of the last ten minutes only, and the
    time left at that pace."""
    from prefrl.cli import main
    from prefrl.rundir.status import DONE_FILE

    def run(name: str, steps: int | None, rows: list[dict]) -> Path:
        d = tmp_path / "sweep" / "runs" / name
        d.mkdir(parents=True)
        if steps is not None:
            (d / "config.json").write_text(json.dumps({"env": "Pendulum-v1", "steps": steps}))
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return d

    run("a_s0", 1000, [{"step": 500, "time": 1.0}, {"step": 1000, "eval/return_mean": 3.5}])
    run("b_s0", 1000, [{"step": 400, "eval/success_at_end": 0.85}, {"step": 450}])
    (run("c_s0", None, [{"step": 500, "eval/return_mean": -5.4}]) / DONE_FILE).write_text("{}")
    going = run("d_s0", 10_000, [{"step": 0, "time": 0.0}, {"step": 1000, "time": 1000.0},
                                 {"step": 6000, "time": 1500.0}])  # fmt: skip
    (tmp_path / "empty").mkdir()
    lock = hold_trainer(going)
    try:
        assert main(["runs", str(tmp_path / "sweep"), str(tmp_path / "empty")]) == 0
    finally:
        lock.close()
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["run", "state", "step", "last", "evaluation", "pace", "left"]
    assert lines[1] == ["runs/a_s0", "finished", "1,000/1,000", "return", "3.5"]
    assert lines[2] == ["runs/b_s0", "stopped", "450/1,000", "success", "0.85"]
    assert lines[3] == ["runs/c_s0", "finished", "500", "return", "-5.4"]
    # 5000 steps in its last 500 s (not 6000 in 1500): 10 a second, 4000 steps left.
    assert lines[4] == ["runs/d_s0", "running", "6,000/10,000", "10", "steps/s", "0:06:40"]
    assert lines[5][0] == str(tmp_path / "empty") + ":" and "no run directories" in " ".join(
        lines[5])  # fmt: skip
    assert main(["runs", str(tmp_path / "missing")]) == 2
    assert "missing: no such folder" in capsys.readouterr().err
    (tmp_path / "sweep" / "runs" / "a_s0" / "config.json").write_text("{not json")
    assert main(["runs", str(tmp_path / "sweep")]) == 2
    assert "a_s0/config.json: not a run's config (unreadable JSON" in capsys.readouterr().err


def test_prefrl_runs_shows_a_resuming_run_as_resuming_and_its_own_pace(tmp_path, monkeypatch):
    """While a resumed run restores its checkpoint, its metrics still end at the previous
    process's last step (they are cut back to the checkpoint's once it is restored): `prefrl
    runs` says it is resuming, not that it trains at that step and pace. Once it trains, its
    pace is of its own rows, not the previous process's."""
    import dataclasses

    from prefrl.agents.a2c import A2CConfig
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir import status
    from prefrl.training import loop as training_loop

    config = RLConfig(env="movingdot", algo="a2c", steps=100, eval_interval=100, eval_episodes=1,
                      video=False, checkpoint_interval=50, log_interval=50,
                      a2c=A2CConfig(n_envs=4, n_steps=5), runs_dir=tmp_path, name="dot",
                      progress=False)  # fmt: skip
    train_rl(config)
    run = tmp_path / "dot"
    with open(run / "metrics.jsonl", "a") as f:  # (the previous process went on past 100)
        f.write(json.dumps({"step": 140, "time": time.time()}) + "\n")
    seen = []
    restore = training_loop.restore_newest

    def watched(*args):
        seen.append(status.run_status(run))
        return restore(*args)

    monkeypatch.setattr(training_loop, "restore_newest", watched)
    train_rl(dataclasses.replace(config, steps=200, resume=run))
    (during,) = seen
    assert (during.state, during.phase.name, during.pace, during.left) == (
        "running", "resuming", None, None)  # fmt: skip
    assert status.status_table([during], tmp_path)[1].split()[:3] == ["dot", "running", "resuming"]
    assert not (run / status.PHASE_FILE).exists()
    assert max(r["step"] for r in read_metrics(run)) == 200  # (140 cut, then trained on)

    # A resumed process's pace: 20 steps/s since it started (at 1000 s), not its last ten minutes'
    # 4.6, of which 500 s went to the previous process and the time between the two.
    rows = [(8_000, 500.0), (10_000, 900.0), (10_000, 1000.0), (10_400, 1020.0)]
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "time": t}) + "\n" for s, t in rows)
    )
    (run / "sessions.jsonl").write_text(json.dumps({"started": "1970-01-01T00:16:40+0000"}) + "\n")
    (run / "config.json").write_text(json.dumps({"env": "movingdot", "steps": 20_000}))
    lock = hold_trainer(run)
    try:
        assert status.run_status(run).pace == pytest.approx(20.0)
    finally:
        lock.close()
