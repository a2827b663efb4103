"""SAC learning quality: HalfCheetah-v5 for 300k steps, mean evaluation return over 10 episodes.

    python benchmarks/sac_learning.py --seeds 0 --steps 300000

Each seed is a normal `prefrl rl --preset sac-mujoco` run (its run directory, curve and videos are
kept under runs/bench-sac-learning/); the JSON holds the final evaluation of each seed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from prefrl.presets import RL_PRESETS
from prefrl.rl.learner import train_rl
from prefrl.rundir.metrics import read_metrics

RESULTS = Path(__file__).parent / "results" / "sac_learning.json"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("runs/bench-sac-learning"))
    parser.add_argument(
        "--resume", action="store_true", help="continue runs left by an earlier call"
    )
    args = parser.parse_args()

    finals = []
    for seed in args.seeds:
        name = f"{args.env}_s{seed}_{args.steps}"
        run_dir = args.runs_dir / name
        config = replace(
            RL_PRESETS["sac-mujoco"].config,
            env=args.env,
            steps=args.steps,
            seed=seed,
            runs_dir=args.runs_dir,
            name=name,
            resume=run_dir if args.resume and run_dir.exists() else None,
            progress=sys.stderr.isatty(),
        )
        result = train_rl(config)
        if result.interrupted:
            raise SystemExit(f"interrupted; continue with --resume (run: {result.run_dir})")
        if result.final_eval is not None:
            ret = float(result.final_eval.returns.mean())
        else:  # a finished run given with --resume: its last evaluation stands
            evals = [r for r in read_metrics(run_dir) if "eval/return_mean" in r]
            ret = float(evals[-1]["eval/return_mean"])
        finals.append(ret)
        print(f"seed {seed}: final evaluation return {ret:.1f} ({result.run_dir})", flush=True)

    out = {
        "command": "python benchmarks/sac_learning.py " + " ".join(sys.argv[1:]),
        "env": args.env,
        "steps": args.steps,
        "seeds": len(finals),
        "return_mean": round(float(np.mean(finals)), 1),
        "return_std": round(float(np.std(finals)), 1),
        "per_seed": [round(r, 1) for r in finals],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
