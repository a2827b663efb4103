"""Metrics to a JSONL log and TensorBoard event files, side by side."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter


class MetricsLogger:
    def __init__(self, run_dir: Path, purge_step: int | None = None):
        """`purge_step`: on resume, TensorBoard hides events logged after this step by the
        interrupted run."""
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = open(self.path, "a", buffering=1)  # noqa: SIM115 (open for the run)
        self._tb = SummaryWriter(str(Path(run_dir) / "tb"), flush_secs=30, purge_step=purge_step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items()}
        self._file.write(json.dumps({"step": int(step), "time": time.time(), **clean}) + "\n")
        for k, v in clean.items():
            if math.isfinite(v):
                self._tb.add_scalar(k, v, step)

    def flush(self) -> None:
        self._file.flush()
        self._tb.flush()

    def close(self) -> None:
        self._file.close()
        self._tb.close()


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a crash: skip it
            continue
    return rows


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop rows logged after `step` (by a run that went on past its last checkpoint)."""
    from prefrl.rundir.atomic import atomic_write

    rows = [r for r in read_metrics(run_dir) if r.get("step", 0) <= step]
    with atomic_write(Path(run_dir) / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


FIT_SCATTER_FILE = "reward_fit.json"
SCATTER_POINTS = 200


def write_fit_scatter(run_dir: Path, step: int, true_returns, learned_returns) -> None:
    """Segment returns under the environment's reward and the newest learned one (up to 200
    segments), for the run page's scatter: whether the labels teach the reward they should."""
    from prefrl.rundir.atomic import atomic_write

    true, learned = np.asarray(true_returns, float), np.asarray(learned_returns, float)
    keep = np.isfinite(true) & np.isfinite(learned)
    true, learned = true[keep][:SCATTER_POINTS], learned[keep][:SCATTER_POINTS]
    with atomic_write(Path(run_dir) / FIT_SCATTER_FILE, "w") as f:
        json.dump({"step": int(step), "true": np.round(true, 4).tolist(),
                   "learned": np.round(learned, 4).tolist()}, f)  # fmt: skip


def read_fit_scatter(run_dir: Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / FIT_SCATTER_FILE).read_text())
    except (OSError, ValueError):
        return None
