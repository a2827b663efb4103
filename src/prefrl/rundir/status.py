"""Where a run stands, from its directory alone (`prefrl runs`): training now or not, its steps,
its last evaluation and, while it trains, its pace and the time it has left. Read while the run
writes: nothing here takes a lock a trainer would wait for."""

from __future__ import annotations

import datetime
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.workers import hold_trainer, trainer_running

DONE_FILE = "sweep_done.json"
"""What a sweep writes into a run's directory once the run has finished (its seconds, its node):
a sweep started again skips the run, and a run kept without its config is known finished by it."""
PACE_WINDOW_S = 600.0
"""A running run's pace is that of its metrics lines of the last this many seconds (evaluations
and reward fits in)."""
SEARCH_DEPTH = 3
"""Folders below a given one searched for runs: runs/NAME, SWEEP/runs/NAME, LOGS/SWEEP/runs/NAME."""
PHASE_FILE = "phase.json"
"""Where a run says what it does before its agent's steps (a pixel run's reward pre-training:
35 minutes or more on Pong, with nothing logged yet), while it does it."""


@dataclass(frozen=True)
class Phase:
    name: str
    done: int
    total: int | None
    """None: a phase without a count (a run setting up, or restoring its checkpoint)."""
    unit: str
    pace: float | None
    """`unit`s a second in this phase so far."""


class PhaseFile:
    """Keeps a run's PHASE_FILE up to date while a phase runs (rewritten at most every `every_s`
    seconds; removed when the phase ends, however it ends)."""

    def __init__(self, run_dir: Path, name: str, total: int | None = None, done: int = 0,
                 unit: str = "", every_s: float = 15.0):  # fmt: skip
        self.path, self.every_s = Path(run_dir) / PHASE_FILE, every_s
        self.phase = Phase(name, done, total, unit, None)
        self._start = self._last = (time.monotonic(), done)

    def __enter__(self) -> Self:
        self._write()
        return self

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self._last[0] < self.every_s:
            return
        t0, done0 = self._start
        pace = (done - done0) / (now - t0) if done > done0 else None
        self.phase = Phase(self.phase.name, done, self.phase.total, self.phase.unit, pace)
        self._last = (now, done)
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f".{PHASE_FILE}.tmp")
        tmp.write_text(json.dumps(self.phase.__dict__))
        os.replace(tmp, self.path)  # (a reader sees the old file or the new one whole)


@contextmanager
def setting_up(run_dir: Path, resuming: bool):
    """While a run builds its loop (or restores its checkpoint): `prefrl runs` says it is
    "setting up" or "resuming", not a resumed run's previous process's last step and pace (its
    metrics are truncated to the checkpoint only once it is restored)."""
    held = hold_trainer(run_dir)
    try:
        with PhaseFile(run_dir, "resuming" if resuming else "setting up"):
            yield
    finally:
        if held is not None:
            held.close()  # (the loop holds its own from its start)


@dataclass(frozen=True)
class RunStatus:
    path: Path
    state: str
    """running (a trainer holds the run now), finished (its last logged step is its last, or a
    sweep marked it done), or stopped (resumable with --resume where its command keeps
    checkpoints)."""
    step: int
    steps: int | None
    """The run's length in its own steps (None where its config has no `steps`)."""
    evaluation: str | None
    """The last evaluation, as `return 15.2` or `success 0.85`."""
    pace: float | None
    """Steps a second lately, while it runs."""
    phase: Phase | None = None
    """What it does before its agent's steps, while it runs (its PHASE_FILE)."""

    @property
    def left(self) -> str | None:
        """The time left at the recent pace, while it runs (of its phase, in one)."""
        if self.state != "running":
            return None
        if self.phase is not None:
            if self.phase.total is None:
                return None
            left, pace = self.phase.total - self.phase.done, self.phase.pace
        elif self.steps is not None:
            left, pace = self.steps - self.step, self.pace
        else:
            return None
        return str(datetime.timedelta(seconds=round(max(left, 0) / pace))) if pace else None


def find_runs(folder: Path) -> list[Path]:
    """The run directories at or below `folder` (a run, a runs folder, a sweep, a folder of
    sweeps): those with a metrics.jsonl, in name order."""
    found, level = [], [Path(folder)]
    for _ in range(SEARCH_DEPTH + 1):
        runs = [d for d in level if (d / "metrics.jsonl").is_file()]
        found += runs
        level = sorted(c for d in level if d not in runs for c in d.iterdir() if c.is_dir())
    return sorted(found)


def run_status(run_dir: Path) -> RunStatus:
    stored = Path(run_dir) / "config.json"  # (a run a benchmark grid kept may have none)
    try:
        config = json.loads(stored.read_text()) if stored.is_file() else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{stored}: not a run's config (unreadable JSON: {e})") from e
    steps = config.get("steps") if isinstance(config.get("steps"), int) else None
    rows = [r for r in read_metrics(run_dir) if isinstance(r.get("step"), int)]
    step = rows[-1]["step"] if rows else 0
    if trainer_running(run_dir):
        state = "running"
    elif (Path(run_dir) / DONE_FILE).is_file() or (steps is not None and step >= steps):
        state = "finished"
    else:
        state = "stopped"
    phase = _phase(run_dir) if state == "running" else None
    pace = None  # (of the agent's steps: none while it is in a phase, nor where it stopped)
    if state == "running" and phase is None:
        pace = _pace([r for r in rows if r.get("time", 0) >= _started(run_dir)])
    return RunStatus(Path(run_dir), state, step, steps, _last_evaluation(rows), pace, phase)


def _started(run_dir: Path) -> float:
    """When the run's newest process started (its last line in sessions.jsonl; 0 if none): a
    resumed run's pace is its own, not that of the process before it."""
    try:
        lines = (Path(run_dir) / "sessions.jsonl").read_text().splitlines()
        started = json.loads(lines[-1])["started"]
        return datetime.datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (FileNotFoundError, IndexError, KeyError, ValueError):  # (none, or not one of ours)
        return 0.0


def _phase(run_dir: Path) -> Phase | None:
    try:
        return Phase(**json.loads((Path(run_dir) / PHASE_FILE).read_text()))
    except (FileNotFoundError, json.JSONDecodeError, TypeError):  # (none, or not one of ours)
        return None


def _last_evaluation(rows: list[dict]) -> str | None:
    for row in reversed(rows):
        if "eval/success_at_end" in row:
            return f"success {row['eval/success_at_end']:.2f}"
        for key, name in (("eval/return_mean", "return"), ("eval/score_mean", "score")):
            if key in row:
                return f"{name} {row[key]:.1f}"
    return None


def _pace(rows: list[dict]) -> float | None:
    timed = [r for r in rows if isinstance(r.get("time"), int | float)]
    if not timed:
        return None
    last = timed[-1]
    recent = [r for r in timed if r["time"] >= last["time"] - PACE_WINDOW_S]
    first = recent[0]
    if last["time"] <= first["time"] or last["step"] <= first["step"]:
        return None
    return (last["step"] - first["step"]) / (last["time"] - first["time"])


def status_table(statuses: list[RunStatus], root: Path) -> list[str]:
    """One aligned line a run: its path under `root`, state, steps, last evaluation, pace and
    time left."""
    cells = [["run", "state", "step", "last evaluation", "pace", "left"]]
    for s in statuses:
        name = str(s.path.relative_to(root)) if s.path != root else s.path.name
        total = f"/{s.steps:,}" if s.steps is not None else ""
        step, pace = f"{s.step:,}{total}", f"{s.pace:,.0f} steps/s" if s.pace else ""
        if s.phase is not None and s.phase.total is None:
            step, pace = s.phase.name, ""
        elif s.phase is not None:
            step = f"{s.phase.name}: {s.phase.done:,}/{s.phase.total:,} {s.phase.unit}"
            rate = s.phase.pace
            pace = f"{rate:,.{1 if rate < 10 else 0}f} {s.phase.unit}/s" if rate else ""
        cells.append([name, s.state, step, s.evaluation or "", pace, s.left or ""])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]  # fmt: skip
