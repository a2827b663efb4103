"""How the benchmarks run their grids: as a sweep on Ray (`prefrl.sweep`), with the same flags
in every script (`--jobs N` runs side by side here, `--address` a cluster, `--gpus-per-run` a
share of a GPU), and the same ending when runs failed or the sweep was stopped."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefrl.sweep import SweepResult, run_sweep


def add_grid_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=1, help="runs trained side by side here")
    parser.add_argument("--address", default=None, help="a Ray cluster to run the grid on")
    parser.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="a share of a GPU per run (GPU machines)"
    )


def run_grid(configs: dict, seeds, runs: Path, args: argparse.Namespace) -> SweepResult:
    """Every config x seed to its end, in `runs`/runs/<config>_s<seed>; exits naming the failed
    runs' errors, or saying how to go on when the sweep was stopped."""
    try:
        sweep = run_sweep(configs, seeds, runs, address=args.address,
                          gpus_per_run=args.gpus_per_run,
                          num_cpus=args.jobs if args.address is None else None)  # fmt: skip
    except KeyboardInterrupt:  # (Ctrl-C or SIGTERM: no traceback)
        raise SystemExit("stopped; start the script again to resume") from None
    for o in sweep.failed:
        print(f"{o.name} failed:\n{o.error}", file=sys.stderr)
    if sweep.failed:
        raise SystemExit(f"{len(sweep.failed)} runs failed (errors above); start the script "
                         "again to resume the others")  # fmt: skip
    if not sweep.complete:
        raise SystemExit("interrupted; start the script again to resume")
    return sweep
