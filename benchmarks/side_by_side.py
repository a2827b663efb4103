"""Two training runs side by side on a 2-core CPU: XLA's own thread pool in each, or one thread each.

The long benchmark runs here go two at a time, one a core. XLA sizes its CPU thread pool to the
machine's cores, so two runs side by side start two threads each on two cores. This measures the
env steps per second of the RFCL loop (Adroit pen, the rfcl-adroit-cpu preset, its first updates
after a short warm start) in three settings, rounds alternating so that drift in the machine's
speed falls on all of them alike:

- alone: one run, the machine otherwise idle (XLA's default pool);
- two, default pool: two runs at once, each with XLA's default pool;
- two, one thread each: two runs at once, XLA_FLAGS set to one thread.

    python benchmarks/side_by_side.py --rounds 2

Writes benchmarks/results/side_by_side.json: per setting, each run's median steps/s per round,
and the machine's total (the sum over the runs at once).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from reward_fit_cost import SINGLE_THREAD_XLA as ONE_THREAD_XLA

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "alone": (1, {}),
    "two, default pool": (2, {}),
    "two, one thread each": (2, {"XLA_FLAGS": ONE_THREAD_XLA}),
}


def train(runs: Path, name: str, steps: int, warmstart: int) -> float:
    """One short RFCL pen run; its median env steps/s over the logs after the warm start's."""
    import dataclasses

    from prefrl.demos.rfcl import train_rfcl
    from prefrl.presets import RFCL_PRESETS
    from prefrl.rundir.metrics import read_metrics

    config = dataclasses.replace(
        RFCL_PRESETS["rfcl-adroit-cpu"].config, env="adroit:pen",
        demos=ROOT / "benchmarks/demos/pen-spread", steps=steps, warmstart_steps=warmstart,
        eval_interval=10**9, eval_episodes=1, checkpoint_interval=10**9, log_interval=500,
        runs_dir=runs, name=name, progress=False,
    )  # fmt: skip
    result = train_rfcl(config)
    rates = [r["train/steps_per_s"] for r in read_metrics(result.run_dir)
             if "train/steps_per_s" in r and r["step"] > warmstart + 500]  # fmt: skip
    return float(np.median(rates))


def round_of(setting: str, runs: Path, steps: int, warmstart: int, tag: str) -> list[float]:
    """The setting's runs started at once, each in its own process; their steps/s."""
    count, env = SETTINGS[setting]
    command = [sys.executable, __file__, "--worker", str(runs), "", str(steps), str(warmstart)]
    procs = []
    for i in range(count):
        command[4] = f"{tag}-{i}"
        procs.append(subprocess.Popen(list(command), env={**os.environ, **env},
                                      stdout=subprocess.PIPE, text=True))  # fmt: skip
    out = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a run of {setting!r} failed (its output above)")
    return [float(o.strip().splitlines()[-1]) for o in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8000, help="env steps a run")
    parser.add_argument("--warmstart", type=int, default=1500, help="of --steps, random actions")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/side_by_side.json")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        runs, name, steps, warmstart = args.worker
        print(train(Path(runs), name, int(steps), int(warmstart)), flush=True)
        return
    rates: dict[str, list[list[float]]] = {s: [] for s in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for k, setting in enumerate(SETTINGS):
                rates[setting].append(
                    round_of(setting, Path(tmp), args.steps, args.warmstart, f"r{r}-{k}")
                )
                print(f"round {r}, {setting}: {rates[setting][-1]}", flush=True)
    rows = [
        {"setting": s, "runs_at_once": SETTINGS[s][0], "xla_flags": SETTINGS[s][1].get("XLA_FLAGS"),
         "steps_per_s_per_run": per_round,
         "machine_steps_per_s": float(np.mean([sum(x) for x in per_round]))}
        for s, per_round in rates.items()
    ]  # fmt: skip
    base = rows[1]["machine_steps_per_s"]
    for row in rows:
        row["vs_two_default"] = row["machine_steps_per_s"] / base
        print(f"{row['setting']:<24} {row['machine_steps_per_s']:7.1f} env steps/s in all "
              f"({row['vs_two_default']:.2f}x two with the default pool)")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python benchmarks/side_by_side.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "task": "RFCL loop, adroit:pen, rfcl-adroit-cpu preset, updates after a warm start",
        "results": rows,
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
