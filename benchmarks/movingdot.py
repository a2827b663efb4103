"""MovingDot from synthetic preferences against the same agent on the true reward, in one run:

- `prefs`: `prefrl frames --preset movingdot` (500 random-policy labels, the seed's MovingDot
  reward network pre-trained on them, then A2C on the learned reward while labels keep coming,
  1500 in all);
- `true`: `prefrl rl --env movingdot --algo a2c` with the same A2C settings and budget.

    python benchmarks/movingdot.py --seeds 0 1 2

The grid (2 methods x seeds) runs as a sweep on Ray (`prefrl.sweep`): --jobs N trains N runs side
by side here, --address on a cluster. Each run is a normal run directory under --runs
(logs/movingdot-bench by default)/runs: stop the script and start it again with the same
arguments; finished runs are skipped, stopped ones resume from their checkpoints. Writes
benchmarks/results/pixels.json: "movingdot", each method's last evaluation return (true game
reward, actions sampled) per seed and its mean, and each run's training time (summed over its
sessions when it was resumed); "learning", the two means side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
from sweep_grid import add_grid_flags, run_grid

from prefrl.presets import FRAME_PRESETS
from prefrl.rl.config import RLConfig
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.provenance import read_sessions

RESULTS = Path(__file__).parent / "results" / "pixels.json"


def configs(steps: int) -> dict:
    prefs = FRAME_PRESETS["movingdot"].config
    prefs = dataclasses.replace(prefs, steps=steps, video=False)
    true = RLConfig(env="movingdot", algo="a2c", steps=steps, a2c=prefs.a2c,
                    eval_interval=prefs.eval_interval, eval_episodes=prefs.eval_episodes,
                    checkpoint_interval=prefs.checkpoint_interval, log_interval=5_000,
                    video=False)  # fmt: skip
    assert true.a2c == prefs.a2c, "both methods train the same A2C"
    return {"movingdot_prefs": prefs, "movingdot_true": true}


def training_seconds(run_dir: Path) -> float:
    """From each session's start to its last metrics row, summed over the run's sessions."""
    starts = [datetime.datetime.strptime(s["started"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
              for s in read_sessions(run_dir)]  # fmt: skip
    times = [r["time"] for r in read_metrics(run_dir)]
    total = 0.0
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else float("inf")
        inside = [t for t in times if start <= t < end]
        total += max(inside) - start if inside else 0.0
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150_000, help="agent steps a run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", type=Path, default=Path("logs/movingdot-bench"))
    add_grid_flags(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    grid = configs(args.steps)
    sweep = run_grid(grid, args.seeds, args.runs, args)
    rows = []
    for label in grid:
        runs = [sweep.run_dir(label, seed) for seed in args.seeds]
        finals = [[r for r in read_metrics(run) if "eval/return_mean" in r][-1] for run in runs]
        returns = [f["eval/return_mean"] for f in finals]
        seconds = [training_seconds(run) for run in runs]
        rows.append({
            "env": "movingdot", "method": label.removeprefix("movingdot_"),
            "agent_steps": args.steps, "seeds": args.seeds, "return_mean": float(np.mean(returns)),
            "return_std": float(np.std(returns, ddof=1)) if len(returns) > 1 else None,
            "per_seed": returns, "eval_step": [f["step"] for f in finals],
            "seconds_per_seed": seconds, "device": "cpu",
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    old["movingdot"] = rows
    by_method = {row["method"]: row for row in rows}
    learning = {"env": "movingdot", "labels": grid["movingdot_prefs"].labels,
                "agent_steps": args.steps, "seeds": len(args.seeds),
                "pref_return_mean": by_method["prefs"]["return_mean"],
                "true_reward_return_mean": by_method["true"]["return_mean"],
                "max_seconds_per_seed": max(by_method["prefs"]["seconds_per_seed"]),
                "device": "cpu"}  # fmt: skip
    old["learning"] = [r for r in old.get("learning", []) if r["env"] != "movingdot"] + [learning]
    old["movingdot_command"] = "python benchmarks/movingdot.py " + " ".join(sys.argv[1:])
    old["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    args.out.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {args.out}; the sweep's table: {args.runs / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
