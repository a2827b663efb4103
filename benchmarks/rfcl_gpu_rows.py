"""Rows for the runs `benchmarks/rfcl_gpu.sh` made (RFCL, the paper's wall-time config, one run
per Adroit task side by side on one GPU, stopped after a fixed time): success on the task's own
initial states at each evaluation, where each demo's start stood at the end, and the env steps/s
each run made beside the others. Also the three-task mean at the last step every run evaluated,
against the published bar (mean success about 50% at 400k steps).

    python benchmarks/rfcl_gpu_rows.py logs/gpu/runs --command "DURATION=480 bash benchmarks/rfcl_gpu.sh"

Writes the `side_by_side` rows of the device's file (`rfcl_<device>.json`, beside rfcl.json)
and keeps each run's metrics, gzipped, in benchmarks/results/rfcl-runs/rfcl-gpu-<device>/.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from device_results import results_path
from rfcl import steps_per_s
from sweep_grid import gzip_files

from prefrl.rundir.metrics import read_metrics

RESULTS = Path(__file__).parent / "results"


def summarise(run_dir: Path, device: str, command: str) -> dict:
    """One run's row (the first nine keys are the columns docs/benchmarks.md shows)."""
    rows = read_metrics(run_dir)
    evals = [r for r in rows if "eval/success_at_end" in r]
    curriculum = [r for r in rows if "rfcl/start_fraction_mean" in r][-1]
    solved = sum(v for k, v in curriculum.items() if k.startswith("rfcl/solved/"))
    return {
        "env": f"adroit:{run_dir.name}", "env_steps": evals[-1]["step"],
        "success_at_end": evals[-1]["eval/success_at_end"],
        "success_once": evals[-1]["eval/success_once"],
        "demos_solved_at_stop": int(solved),
        "start_fraction_mean_at_stop": round(curriculum["rfcl/start_fraction_mean"], 3),
        "steps_per_s": steps_per_s(run_dir), "device": device, "command": command,
        "method": "rfcl", "preset": "rfcl-adroit",
        "demos": 5, "seeds": 1, "stage_at_stop": int(curriculum["rfcl/stage"]),
        "steps_at_stop": curriculum["step"],
        "success_at_end_by_step": {r["step"]: r["eval/success_at_end"] for r in evals},
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the folder of run directories (door, pen, ...)")
    parser.add_argument("--command", required=True, help="the command that made the runs")
    args = parser.parse_args()
    if not args.runs.is_dir():
        raise SystemExit(f"{args.runs} is not a folder: give the folder of run directories")
    run_dirs = sorted(d for d in args.runs.iterdir()
                      if any("eval/success_at_end" in r for r in read_metrics(d)))  # fmt: skip
    if not run_dirs:
        raise SystemExit(f"no run directory in {args.runs} has an evaluation yet")
    session = json.loads((run_dirs[0] / "sessions.jsonl").read_text().splitlines()[0])
    rows = [summarise(d, session["devices"][0], args.command) for d in run_dirs]
    for row in rows:
        row["runs_side_by_side"] = len(rows)
    common = max(set.intersection(*(set(r["success_at_end_by_step"]) for r in rows)))
    at_common = [r["success_at_end_by_step"][common] for r in rows]
    out = results_path(RESULTS / "rfcl.json", session["devices"][0])
    old = json.loads(out.read_text()) if out.exists() else {}
    old["side_by_side"] = rows
    old["side_by_side_mean"] = [
        {
            "envs": [r["env"] for r in rows],
            "env_steps": common,
            "success_at_end_mean": float(np.mean(at_common)),
            "published_bar": "RFCL about 0.50 at 400k env steps, 0.62 at 1M (RLPD 0.49, 0.57)",
        }
    ]
    out.write_text(json.dumps(old, indent=1) + "\n")
    keep = RESULTS / "rfcl-runs" / out.stem.replace("rfcl_", "rfcl-gpu-")
    for d in run_dirs:
        gzip_files(d, keep / d.name, ("metrics.jsonl", "sessions.jsonl", "config.json"))
    print(json.dumps(old["side_by_side_mean"][0]))
    for r in rows:
        print({k: r[k] for k in ("env", "env_steps", "success_at_end", "steps_per_s")})
    print(f"wrote {out} and {keep}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
