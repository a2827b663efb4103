"""How the benchmarks run their grids: as a sweep on Ray (`prefrl.sweep`), with the same flags
in every script (`--jobs N` runs side by side here, `--address` a cluster, `--gpus-per-run` a
share of a GPU), and the same ending when runs failed or the sweep was stopped.

A grid given a `keep` folder (in benchmarks/results, committed) keeps each run's metrics there,
gzipped, within a minute of its end, and restores the finished ones into a run folder that lacks
them: a machine does not outlive a session here, so a grid of runs longer than a session's free
cores is finished over several sessions, each adding the runs it completed."""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import threading
from pathlib import Path

from prefrl.sweep import SweepResult, run_sweep
from prefrl.sweep.runner import DONE_FILE
from prefrl.sweep.spec import expand_runs

KEPT_FILES = ("metrics.jsonl", "sessions.jsonl", DONE_FILE)
"""What is kept of a finished run: enough for its rows and plots, and for a sweep to skip it
(the record that it finished last, so that a copy cut short is no finished run)."""


def add_grid_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=1, help="runs trained side by side here")
    parser.add_argument("--address", default=None, help="a Ray cluster to run the grid on")
    parser.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="a share of a GPU per run (GPU machines)"
    )


def run_grid(
    configs: dict, seeds, runs: Path, args: argparse.Namespace, keep: Path | None = None
) -> SweepResult:
    """Every config x seed to its end, in `runs`/runs/<config>_s<seed>; exits naming the failed
    runs' errors, or saying how to go on when the sweep was stopped. With `keep`, finished runs
    are kept in (and restored from) `keep`/<runs' name>."""
    names = [r.name for r in expand_runs(configs, seeds, runs / "runs")]
    stop_keeping = threading.Event()
    if keep is not None:
        keep_finished(runs, keep, names)
        threading.Thread(target=keep_while_running, daemon=True,
                         args=(runs, keep, names, stop_keeping)).start()  # fmt: skip
    try:
        sweep = run_sweep(configs, seeds, runs, address=args.address,
                          gpus_per_run=args.gpus_per_run,
                          num_cpus=args.jobs if args.address is None else None)  # fmt: skip
    except KeyboardInterrupt:  # (Ctrl-C or SIGTERM: no traceback)
        raise SystemExit("stopped; start the script again to resume") from None
    finally:
        stop_keeping.set()
        if keep is not None:
            keep_finished(runs, keep, names)
    for o in sweep.failed:
        print(f"{o.name} failed:\n{o.error}", file=sys.stderr)
    if sweep.failed:
        raise SystemExit(f"{len(sweep.failed)} runs failed (errors above); start the script "
                         "again to resume the others")  # fmt: skip
    if not sweep.complete:
        raise SystemExit("interrupted; start the script again to resume")
    return sweep


def keep_finished(runs: Path, keep: Path, names: list[str]) -> None:
    """Both ways between the run directories and `keep` (gzipped): a finished run missing from
    `runs` is restored from `keep` (a new machine, a cleaned logs folder), one missing from
    `keep` is kept."""
    for name in names:
        run_dir, kept = runs / "runs" / name, keep / runs.name / name
        kept_done, done = kept / f"{DONE_FILE}.gz", run_dir / DONE_FILE
        if kept_done.exists() and not done.exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # (a run stopped midway: it finished)
            run_dir.mkdir(parents=True)
            for f in KEPT_FILES:  # (the record that it finished last)
                if (kept / f"{f}.gz").exists():
                    with gzip.open(kept / f"{f}.gz") as src, open(run_dir / f, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        elif done.exists() and not kept_done.exists():
            gzip_files(run_dir, kept, KEPT_FILES)


def keep_while_running(
    runs: Path, keep: Path, names: list[str], stop: threading.Event, every_s: float = 60.0
) -> None:
    """`keep_finished` each minute while the grid runs: a run is kept as it finishes, not when
    the whole grid does (a session can end, and its machine go, between the two)."""
    while not stop.wait(every_s):
        keep_finished(runs, keep, names)


def gzip_files(src: Path, dst: Path, names) -> None:
    """Copy the files `names` that `src` holds into `dst`, gzipped (the same bytes each time)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in names:
        if (src / f).exists():
            with open(src / f, "rb") as a, gzip.GzipFile(dst / f"{f}.gz", "wb", mtime=0) as b:
                shutil.copyfileobj(a, b)
