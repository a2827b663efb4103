"""`prefrl sweep`: a training command's runs over a grid of flags x seeds, on Ray."""

from __future__ import annotations

import argparse
import importlib
import itertools

USAGE = """prefrl sweep COMMAND [--grid FIELD=V1,V2 ...] [--config LABEL='FLAGS' ...] [--seeds S ...]
                    [--dir DIR] [--address HOST:PORT] [--cpus-per-run N] [--gpus-per-run F]
                    [--num-cpus N] [--max-retries N] [-- FLAGS OF COMMAND]"""

DESCRIPTION = """Run a training command (train, rl, offline, offline-cpl, finetune, frames, rfcl)
for every combination of --grid values (and every --config, a named set of flags), each with
every seed, as Ray tasks: on a Ray of its own on this machine by default (even where a `ray
start` runs here or RAY_ADDRESS is set), on a cluster with --address. Each run is a normal run
directory, DIR/runs/<config>_s<seed>. Started again, a sweep skips finished runs and resumes
stopped ones from their checkpoints (offline-cpl and finetune runs, minutes long, start again).
At the end: DIR/results.md (mean ± std over seeds per config), results.json and curves.png; a
run that fails is reported with its error, the others go on, and the exit code is 1. Ctrl-C (or
SIGTERM) stops the sweep; the same command again goes on. A directory remembers each run's
config (another config under a run's name is refused) and takes one sweep at a time. Flags after
-- go to every run, e.g.
  prefrl sweep train --grid teacher.preset=oracle,mistake --seeds 0 1 2 --dir runs/teachers \\
      -- --preset quickstart --steps 20000"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prefrl sweep", usage=USAGE, description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument(
        "command",
        help="train, rl, offline, offline-cpl, finetune, frames or rfcl (its fields, the grid's "
        "names: prefrl COMMAND --help)",
    )
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="a config field (dotted, as the command's flag without --) and its values",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="LABEL='FLAGS'",
        help="a named config: flags of the command (a list instead of, or times, a grid)",
    )
    p.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="every config runs with each (default: 0)"
    )
    p.add_argument("--dir", default=None, help="sweep directory (default: runs/sweep-COMMAND)")
    p.add_argument(
        "--address",
        default=None,
        help="a Ray cluster, host:port, or auto: the one `ray start` runs on this machine (or "
        "RAY_ADDRESS) (default: a Ray started on this machine for the sweep)",
    )
    p.add_argument(
        "--cpus-per-run", type=float, default=1.0, help="Ray's CPUs per run (default: 1)"
    )
    p.add_argument(
        "--gpus-per-run", type=float, default=0.0, help="e.g. 0.25: four runs a GPU (default: 0)"
    )
    p.add_argument(
        "--num-cpus",
        type=int,
        default=None,
        help="CPUs a Ray started here hands out (default: all of this machine's)",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="times a run is started again elsewhere when its node dies (default: 3)",
    )
    return p  # fmt: skip


def build_configs(command: str, base: list[str], grid: list[str], named: list[str]) -> dict:
    """label -> config, every one parsed by the command's own flags before any run starts."""
    import shlex

    from prefrl.cli.common import parse_config
    from prefrl.sweep.spec import TRAINERS, _check_field

    if command not in TRAINERS:
        raise ValueError(f"prefrl sweep {command!r}: expected one of {', '.join(TRAINERS)}")
    module, cls_name, _, presets_name = TRAINERS[command]
    cls = getattr(importlib.import_module(module), cls_name)
    presets = (
        getattr(importlib.import_module("prefrl.presets"), presets_name) if presets_name else {}
    )
    axes = []
    for item in grid:
        field, sep, values = item.partition("=")
        if not sep or not field or not values:
            raise ValueError(f"--grid {item!r} is invalid: expected FIELD=V1,V2 (e.g. "
                             "teacher.preset=oracle,mistake)")  # fmt: skip
        _check_field(cls(), field.strip())
        axes.append((field.strip(), [v.strip() for v in values.split(",")]))
    variants = [("", [])]
    if named:
        variants = []
        for item in named:
            label, sep, flags = item.partition("=")
            if not sep or not label:
                raise ValueError(f"--config {item!r} is invalid: expected LABEL='FLAGS'")
            variants.append((label.strip(), shlex.split(flags)))
    configs = {}
    for (vlabel, vflags), values in itertools.product(variants, itertools.product(
            *(v for _, v in axes))):  # fmt: skip
        assignment = [f"{f}={v}" for (f, _), v in zip(axes, values)]
        label = ",".join(([vlabel] if vlabel else []) + assignment) or command
        flags = [*base, *vflags, *(x for (f, _), v in zip(axes, values) for x in (f"--{f}", v))]
        try:
            configs[label] = parse_config(cls, presets, flags, f"prefrl sweep {command}", "")
        except SystemExit:
            raise ValueError(
                f"config {label!r}: the flags {' '.join(flags)} are invalid for prefrl "
                f"{command} (the field and value are named above); no run was started"
            ) from None
    return configs


def cmd_sweep(args: list[str]) -> int:
    from prefrl.sweep import run_sweep

    own, base = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (
        args, [])  # fmt: skip
    opts = _parser().parse_args(own)
    configs = build_configs(opts.command, base, opts.grid, opts.config)
    directory = opts.dir or f"runs/sweep-{opts.command}"
    print(f"sweep: {len(configs)} configs x {len(opts.seeds)} seeds = "
          f"{len(configs) * len(opts.seeds)} runs in {directory}", flush=True)  # fmt: skip
    try:
        result = run_sweep(
            configs, opts.seeds, directory, address=opts.address, cpus_per_run=opts.cpus_per_run,
            gpus_per_run=opts.gpus_per_run, max_retries=opts.max_retries, num_cpus=opts.num_cpus,
        )  # fmt: skip
    except KeyboardInterrupt:
        print(f"stopped; start the same sweep again to resume it ({directory})")
        return 130
    print((result.directory / "results.md").read_text(), end="")
    print(
        f"results: {result.directory / 'results.json'}, curves: {result.directory / 'curves.png'}"
    )
    for o in result.failed:
        print(f"failed: {o.name} on {o.node}:\n{o.error}")
    return 0 if result.complete else 1
