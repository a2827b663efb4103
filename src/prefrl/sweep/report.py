"""A sweep's results: per config, each metric's final value as mean ± std over its seeds
(results.json, results.md), and the evaluation curves per config (curves.png). Failed runs are
listed with their error, never left out silently."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from prefrl.rundir.atomic import atomic_write
from prefrl.rundir.metrics import read_metrics

RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
CURVES_FILE = "curves.png"
CURVE_METRIC = "eval/return_mean"
REPORTED = ("reward/val_accuracy", "reward/segment_return_corr", "feedback/labels",
            "cpl/val_accuracy", "start_return_mean")  # fmt: skip
"""Besides every eval/* metric: the reward model's fit and the labels, CPL's held-out accuracy
and a fine-tuned policy's return before fine-tuning, where a run has them."""


def final_metrics(run_dir: Path) -> dict[str, float]:
    """The last value of each reported metric in a run's log."""
    out: dict[str, float] = {}
    for row in read_metrics(run_dir):
        for k, v in row.items():
            if (k.startswith("eval/") or k in REPORTED) and isinstance(v, int | float):
                out[k] = float(v)
    return out


def summarise(directory: Path, runs, outcomes) -> dict:
    """Writes results.json, results.md and curves.png into the sweep directory; returns the
    table: {label: {"seeds": [...], "metrics": {name: {mean, std, values}}}}."""
    directory = Path(directory)
    status = {o.name: o for o in outcomes}
    table: dict[str, dict] = {}
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for r in runs:
        entry = table.setdefault(r.label, {"seeds": [], "metrics": {}, "runs": {}})
        o = status[r.name]
        entry["runs"][r.name] = o.status
        run_dir = directory / "runs" / r.name
        if o.status not in ("done", "finished"):
            continue
        entry["seeds"].append(r.seed)
        for k, v in final_metrics(run_dir).items():
            entry["metrics"].setdefault(k, {"values": []})["values"].append(v)
        rows = [x for x in read_metrics(run_dir) if CURVE_METRIC in x]
        if rows:
            steps = np.array([x["step"] for x in rows], float)
            curves.setdefault(r.label, []).append(
                (steps, np.array([x[CURVE_METRIC] for x in rows]))
            )
    for entry in table.values():
        for m in entry["metrics"].values():
            v = np.asarray(m["values"], float)
            m["mean"] = float(v.mean())
            m["std"] = float(v.std(ddof=1)) if len(v) > 1 else None  # (no spread from one)
    failed = [{"run": o.name, "error": o.error} for o in outcomes if o.status == "failed"]
    stopped = [o.name for o in outcomes if o.status in ("stopped", "running", "pending")]
    report = {"configs": table, "failed": failed, "unfinished": stopped}
    with atomic_write(directory / RESULTS_FILE, "w") as f:
        json.dump(report, f, indent=1, default=_json_safe)
    with atomic_write(directory / TABLE_FILE, "w") as f:
        f.write(markdown_table(report))
    if curves:
        plot_curves(curves, directory / CURVES_FILE)
    return report


def _json_safe(x):
    return None if isinstance(x, float) and not math.isfinite(x) else str(x)


def markdown_table(report: dict) -> str:
    table = report["configs"]
    names = sorted({k for e in table.values() for k in e["metrics"]},
                   key=lambda k: (not k.startswith("eval/"), k))  # fmt: skip
    lines = ["| config | seeds | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]  # fmt: skip
    for label, e in table.items():
        cells = []
        for k in names:
            m = e["metrics"].get(k)
            if m is None:
                cells.append("–")
            elif len(m["values"]) == 1:  # (no spread from one seed)
                cells.append(f"{m['mean']:.3g}")
            else:
                cells.append(f"{m['mean']:.3g} ± {m['std']:.2g}")
        lines.append(f"| {label} | {len(e['seeds'])} | " + " | ".join(cells) + " |")
    for f in report["failed"]:
        last = (f["error"] or "").strip().splitlines()[-1:] or ["(no message)"]
        lines.append(f"\nfailed: {f['run']}: {last[0]}")
    if report["unfinished"]:
        lines.append(f"\nnot finished: {', '.join(report['unfinished'])}")
    return "\n".join(lines) + "\n"


def plot_curves(curves: dict, path: Path) -> None:
    """Mean ± std of the evaluation return over seeds, per config (on the steps all share)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.2))
    for label, runs in curves.items():
        common = sorted(set.intersection(*(set(s.tolist()) for s, _ in runs)))
        if not common:
            continue
        ys = np.stack([np.interp(common, s, y) for s, y in runs])
        mean, std = ys.mean(0), ys.std(0)
        seeds = f"{len(runs)} seed" + ("s" if len(runs) > 1 else "")
        ax.plot(common, mean, marker="o" if len(common) < 20 else None, markersize=3,
                label=f"{label} ({seeds})")  # fmt: skip
        ax.fill_between(common, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("step (of the environment; of training for offline and CPL runs)")
    ax.set_ylabel("evaluation return")
    ax.grid(alpha=0.3)
    if ax.lines:  # beside the axes, not over the bands (grids make many configs)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
