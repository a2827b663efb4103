from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.metrics import read_metrics


@dataclass(frozen=True)
class Curve:
    """What `learning_curve.png` draws of the evaluations, and says of them."""

    label: str = "evaluation return"
    """What the values are (the y axis)."""
    bounds: tuple[float, float] | None = None
    """The range they cannot leave (the band is cut there)."""
    lines: tuple[tuple[str, str], ...] = (("eval/return_mean", ""),)
    """(metrics key, legend) of each line; the first has the band of its `_std` key."""
    band: str | None = None
    """What the band is, for the legend (with it, or more than one line, there is a legend)."""


def plot_learning_curve(run_dir: Path, title: str = "", curve: Curve = Curve()) -> Path | None:
    """learning_curve.png: evaluations (`curve`: the first line as mean +- std) against
    environment steps."""
    rows = read_metrics(run_dir)
    (key, legend), *more = curve.lines
    rows = [r for r in rows if key in r]
    if not rows:
        return None
    steps = [r["step"] for r in rows]
    mean = [r[key] for r in rows]
    std_key = key.replace("_mean", "_std")
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    (line,) = ax.plot(steps, mean, marker="o", markersize=3, label=legend)
    if all(std_key in r for r in rows):
        lo = np.array([m - r[std_key] for m, r in zip(mean, rows)])
        hi = np.array([m + r[std_key] for m, r in zip(mean, rows)])
        if curve.bounds is not None:
            lo, hi = np.clip(lo, *curve.bounds), np.clip(hi, *curve.bounds)
        ax.fill_between(steps, lo, hi, alpha=0.25, color=line.get_color(), label=curve.band)
    for other, legend in more:
        points = [(r["step"], r[other]) for r in rows if other in r]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, ls="--", label=legend)
    if curve.bounds is not None:
        margin = 0.03 * (curve.bounds[1] - curve.bounds[0])
        ax.set_ylim(curve.bounds[0] - margin, curve.bounds[1] + margin)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(curve.label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if more or curve.band:
        ax.legend(fontsize=8)
    return _save(fig, Path(run_dir) / "learning_curve.png")


SOLVED = "rfcl/solved/demo_"


def curriculum_events(rows: list[dict]) -> tuple[dict[int, int], int | None]:
    """From an RFCL run's metrics: the step at which each solved demo was first logged solved
    ({demo: step}), and the first step logged in stage 2 (None: not reached)."""
    solved: dict[int, int] = {}
    stage2 = None
    for r in rows:
        for k, v in r.items():
            if k.startswith(SOLVED) and v:
                solved.setdefault(int(k.removeprefix(SOLVED)), r["step"])
        if stage2 is None and r.get("rfcl/stage") == 2:
            stage2 = r["step"]
    return solved, stage2


def plot_curriculum(run_dir: Path, prefix: str = "rfcl/start_fraction/demo_") -> Path | None:
    """curriculum.png: where each demo's episodes start (1: at its end, 0: at its first state)
    against environment steps, a star where a demo was solved and a dashed line where stage 2
    began, beside a histogram of where the starts are now."""
    rows = [r for r in read_metrics(run_dir) if any(k.startswith(prefix) for k in r)]
    if not rows:
        return None
    demos = sorted({k for r in rows for k in r if k.startswith(prefix)},
                   key=lambda k: int(k.removeprefix(prefix)))  # fmt: skip
    solved, stage2 = curriculum_events(rows)
    fig, (curves, hist) = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100,
                                       gridspec_kw={"width_ratios": [3, 1]})  # fmt: skip
    for key in demos:
        demo = int(key.removeprefix(prefix))
        points = [(r["step"], r[key]) for r in rows if key in r]
        label = f"{demo} (solved)" if demo in solved else str(demo)
        (line,) = curves.plot(*zip(*points, strict=True), label=label)
        if demo in solved:
            curves.plot(solved[demo], 0.0, "*", color=line.get_color(), markersize=11)
    if stage2 is not None:
        curves.axvline(stage2, color="grey", ls="--", lw=1, label="stage 2")
    curves.set_xlabel("environment steps")
    curves.set_ylabel("start along the demo (1 = its end)")
    curves.set_ylim(-0.05, 1.05)
    curves.grid(alpha=0.3)
    if len(demos) <= 10:
        curves.legend(title="demo", fontsize=7)
    hist.hist(
        [rows[-1][k] for k in demos if k in rows[-1]], bins=10, range=(0, 1), edgecolor="white"
    )
    hist.set_xlabel("start fraction now")
    hist.set_ylabel("demos")
    hist.yaxis.set_major_locator(MaxNLocator(integer=True))  # (demos are counted whole)
    return _save(fig, Path(run_dir) / "curriculum.png")


def _save(fig, path: Path) -> Path:
    """Write the figure as a PNG at `path` atomically (a viewer never sees half a file)."""
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png")
    plt.close(fig)
    return path
