from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.metrics import read_metrics


def plot_learning_curve(
    run_dir: Path, key: str = "eval/return_mean", title: str = ""
) -> Path | None:
    """learning_curve.png: evaluation return (mean +- std) against environment steps."""
    rows = [r for r in read_metrics(run_dir) if key in r]
    if not rows:
        return None
    steps = [r["step"] for r in rows]
    mean = [r[key] for r in rows]
    std_key = key.replace("_mean", "_std")
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(steps, mean, marker="o", markersize=3)
    if all(std_key in r for r in rows):
        lo = [m - r[std_key] for m, r in zip(mean, rows)]
        hi = [m + r[std_key] for m, r in zip(mean, rows)]
        ax.fill_between(steps, lo, hi, alpha=0.25)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(run_dir) / "learning_curve.png"
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png")
    plt.close(fig)
    return path
