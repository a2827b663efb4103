"""Pieces every training loop shares: the run directory, NaN checks, evaluation outputs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from prefrl.loops.evaluate import EvalResult
from prefrl.render import write_video
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.plots import plot_learning_curve


def run_name(env: str, algo: str, seed: int) -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{env.replace(':', '-').replace('/', '-')}_{algo}_s{seed}_{stamp}"


def open_run_dir(resume: Path | None, runs_dir: Path, name: str) -> Path:
    """The run directory: the one to resume, or a new (empty) one under `runs_dir`."""
    if resume is not None:
        run_dir = Path(resume)
    else:
        run_dir = Path(runs_dir) / name
        if run_dir.exists() and any(run_dir.iterdir()):
            raise FileExistsError(
                f"run directory {run_dir} already exists; pick another --name or continue it "
                f"with --resume {run_dir}"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def check_finite(row: dict[str, float], step: int) -> None:
    bad = [k for k, v in row.items() if not np.isfinite(v)]
    if bad:
        raise FloatingPointError(
            f"{', '.join(bad)} became NaN or inf by step {step}; stopped. The latest checkpoint "
            "holds the last good state"
        )


def write_eval(
    run_dir: Path,
    metrics: MetricsLogger,
    step: int,
    result: EvalResult,
    record: bool,
    fps: float,
    title: str,
) -> Path | None:
    """Log an evaluation, write its video (when recorded) and redraw the learning curve."""
    metrics.log(step, result.summary)
    video = None
    if record and result.frames:
        video = write_video(run_dir / "videos" / f"eval_{step:09d}.mp4", result.frames, fps=fps)
    plot_learning_curve(run_dir, title=title)
    metrics.flush()
    return video
