"""Where a run stands, from its directory alone (`prefrl runs`): training now or not, its steps,
its last evaluation and, while it trains, its pace and the time it has left. Read while the run
writes: nothing here takes a lock a trainer would wait for."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.workers import trainer_running

DONE_FILE = "sweep_done.json"
"""What a sweep writes into a run's directory once the run has finished (its seconds, its node):
a sweep started again skips the run, and a run kept without its config is known finished by it."""
PACE_WINDOW_S = 600.0
"""A running run's pace is that of its metrics lines of the last this many seconds (evaluations
and reward fits in)."""
SEARCH_DEPTH = 3
"""Folders below a given one searched for runs: runs/NAME, SWEEP/runs/NAME, LOGS/SWEEP/runs/NAME."""


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

    @property
    def left(self) -> str | None:
        """The time left at the recent pace, while it runs."""
        if self.state != "running" or not self.pace or self.steps is None:
            return None
        return str(datetime.timedelta(seconds=round(max(self.steps - self.step, 0) / self.pace)))


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
    return RunStatus(Path(run_dir), state, step, steps, _last_evaluation(rows),
                     _pace(rows) if state == "running" else None)  # fmt: skip


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
        pace = f"{s.pace:,.0f} steps/s" if s.pace else ""
        cells.append([name, s.state, f"{s.step:,}{total}", s.evaluation or "", pace, s.left or ""])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]  # fmt: skip
