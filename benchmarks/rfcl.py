"""RFCL against its baselines on a sparse-reward task, at the same env-step budget, in one run:

- `rfcl`: reverse then forward curriculum, demo transitions in half of each stage-1 batch;
- `sac+demos`: every episode from the task's initial states, demo transitions in half of each
  batch (RLPD-style symmetric sampling);
- `sac`: every episode from the task's initial states, no demos.

    python benchmarks/rfcl.py --env toy:maze --demos 1 --steps 60000 --seeds 0 1 2

Each run is a normal run directory under --runs (logs/rfcl-bench by default): stop the script
at any time and start it again with the same arguments; finished runs are read back, stopped
ones resume from their checkpoints. Writes benchmarks/results/rfcl.json (success at the end
and at some step on the task's own initial states, deterministic actions, mean and std over
seeds, beside the env steps per second of each method).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from prefrl.loops.demos import script_demos
from prefrl.loops.rfcl import RFCL_SAC, RFCLConfig, train_rfcl
from prefrl.rundir.metrics import read_metrics

METHODS = {
    "rfcl": {},
    "sac+demos": {"reverse_curriculum": False, "forward_curriculum": False},
    "sac": {"reverse_curriculum": False, "forward_curriculum": False, "demo_actions": False},
}
RESULTS = Path(__file__).parent / "results" / "rfcl.json"


def last_eval(run_dir: Path) -> dict | None:
    evals = [r for r in read_metrics(run_dir) if "eval/success_at_end" in r]
    return evals[-1] if evals else None


def steps_per_s(run_dir: Path) -> float:
    rates = [r["train/steps_per_s"] for r in read_metrics(run_dir) if "train/steps_per_s" in r]
    return float(np.median(rates)) if rates else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="toy:maze")
    parser.add_argument("--demos", type=int, default=1, help="scripted demos to learn from")
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256, 256])
    parser.add_argument("--runs", type=Path, default=Path("logs/rfcl-bench"))
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    args.runs.mkdir(parents=True, exist_ok=True)
    demo_dir = args.runs / f"demos-{args.env.replace(':', '-')}-{args.demos}"
    if not demo_dir.exists():
        script_demos(args.env, args.demos, seed=1000).save(demo_dir)
    sac = dataclasses.replace(RFCL_SAC, hidden_dims=tuple(args.hidden))
    rows = []
    for method in args.methods:
        finals, rates = [], []
        for seed in args.seeds:
            name = f"{args.env.replace(':', '-')}_{method}_d{args.demos}_s{seed}"
            run_dir = args.runs / name
            config = RFCLConfig(
                env=args.env, demos=demo_dir, steps=args.steps, seed=seed, sac=sac,
                eval_interval=max(args.steps // 12, 1000), eval_episodes=args.eval_episodes,
                checkpoint_interval=max(args.steps // 6, 1000), runs_dir=args.runs, name=name,
                progress=False, resume=run_dir if (run_dir / "config.json").exists() else None,
                **METHODS[method],
            )  # fmt: skip
            done = last_eval(run_dir) if run_dir.exists() else None
            if done is None or done["step"] < args.steps:
                print(f"{name}: training", flush=True)
                start = time.time()
                train_rfcl(config)
                print(f"{name}: {time.time() - start:.0f} s", flush=True)
            final = last_eval(run_dir)
            finals.append(final)
            rates.append(steps_per_s(run_dir))
        at_end = [f["eval/success_at_end"] for f in finals]
        once = [f["eval/success_once"] for f in finals]
        rows.append({
            "env": args.env, "method": method, "demos": args.demos, "env_steps": args.steps,
            "seeds": len(args.seeds), "success_mean": float(np.mean(at_end)),
            "success_std": float(np.std(at_end)), "success_once_mean": float(np.mean(once)),
            "per_seed": at_end, "steps_per_s": float(np.mean(rates)), "device": "cpu",
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    command = "python benchmarks/rfcl.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": command, "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores", "sac_hidden": args.hidden, "results": rows,
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
