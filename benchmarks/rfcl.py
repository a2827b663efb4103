"""RFCL against its baselines on a sparse-reward task, at the same env-step budget, in one run:

- `rfcl`: reverse then forward curriculum, demo transitions in half of each stage-1 batch;
- `sac+demos`: every episode from the task's initial states, demo transitions in half of each
  batch (RLPD-style symmetric sampling);
- `sac`: every episode from the task's initial states, no demos.

    python benchmarks/rfcl.py --env toy:maze --demos 1 --steps 60000 --seeds 0 1 2
    python benchmarks/rfcl.py --env adroit:door --demos 5 --preset rfcl-adroit-cpu --seeds 0 1 2
    python benchmarks/rfcl.py --env adroit:pen --demos 5 --preset rfcl-adroit-cpu --seeds 0 1 2
    python benchmarks/rfcl.py --env adroit:relocate --demos 5 --preset rfcl-adroit-cpu --settle 17
    # people's demos (hand_dapg's door-v0_demos.pickle), the paper's time limit
    python benchmarks/rfcl.py --env adroit:door --demos 5 --dapg door-v0_demos.pickle \
        --preset rfcl-adroit-cpu --reverse-time-divisor 3 --runs logs/rfcl-bench-dapg
    # ... every method's actions bounded to 1.25 x the demos' largest (RFCL's data_action_scale)
    python benchmarks/rfcl.py --env adroit:door --demos 5 --dapg door-v0_demos.pickle \
        --preset rfcl-adroit-cpu --reverse-time-divisor 3 --demo-action-scale 1.25 \
        --runs logs/rfcl-bench-dapg-as
    python benchmarks/rfcl.py --env metaworld:stick-pull --demos 1 --preset rfcl-metaworld-cpu \
        --methods rfcl sac+demos --seeds 0 1 2 --jobs 2 --runs logs/rfcl-bench-mw
    python benchmarks/rfcl.py --throughput --env toy:maze     # env steps/s of the loop
    python benchmarks/rfcl.py --throughput --env adroit:door --demos 5 --runs logs/gpu \
        --throughput-configs cpu sample-efficient-cpu --throughput-steps 2500
    # the paper's wall-time config, where there is a GPU (planned demos: time limit 16 + all)
    python benchmarks/rfcl.py --env adroit:door --demos 5 --preset rfcl-adroit \
        --reverse-time-divisor 1 --env-workers 8 --runs logs/rfcl-bench-gpu

The demos are made here, once per --runs directory (or, with --demos-from, taken from a demo
folder of yours, e.g. recorded from a trained policy with `prefrl demos record`): scripted on the mazes and on MetaWorld
(MetaWorld's own scripted policies), planned with the simulator on Adroit (`prefrl demos plan`, reset seeds from 1000), with --settle as given (a
--runs directory holds one set: another --settle is refused); with --dapg, the first --demos
of a hand_dapg pickle's people's demos that still succeed when replayed here
(`prefrl demos import-dapg`). Rows are kept per env, device, demo source, action bound and
method: a grid of some --methods leaves the others' rows.

The grid (methods x seeds) runs as a sweep on Ray (`prefrl.sweep`): --jobs N runs N side by
side on this machine (on 2 cores the small maze networks leave a core mostly idle, so two runs
side by side finish sooner than one after the other), --address a Ray cluster. Each run is a
normal run directory under --runs (logs/rfcl-bench by default)/runs: stop the script at any
time and start it again with the same arguments; finished runs are skipped, stopped ones
resume from their checkpoints. Each run's metrics are kept in benchmarks/results/rfcl-runs
(--keep; gzipped, to commit) within a minute of its end: on a new machine the grid restores
its finished runs from there and runs only the others. Writes benchmarks/results/rfcl.json
(success at the end and at some step on the task's own initial states, deterministic actions,
mean and std over seeds, in the last evaluation and averaged over the last 5, beside the env
steps per second of each method).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from device_results import device_kind, results_path
from sweep_grid import add_grid_flags, run_grid

from prefrl.data.demos import DemoSet
from prefrl.demos.imports import import_dapg_demos
from prefrl.demos.make import script_demos
from prefrl.demos.planner import PLANNED_TASKS, plan_demos
from prefrl.demos.rfcl import train_rfcl
from prefrl.demos.rfcl_config import RFCL_SAC, RFCLConfig
from prefrl.presets import RFCL_PRESETS
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.plots import plot_curriculum

METHODS = {
    "rfcl": {},
    "sac+demos": {"reverse_curriculum": False, "forward_curriculum": False},
    "sac": {"reverse_curriculum": False, "forward_curriculum": False, "demo_actions": False},
}
RESULTS = Path(__file__).parent / "results" / "rfcl.json"


OVERRIDES = ("reverse_time_divisor", "solved_share", "env_workers", "demo_action_scale")
"""RFCLConfig fields the flags of the same names set, when given, over the preset's."""


def label(args, method: str) -> str:
    return f"{args.env.replace(':', '-')}_{method}_d{args.demos}{variant_suffix(args)}"


def source_suffix(args) -> str:
    """What run, demo and figure names add for people's demos (planned ones add nothing)."""
    if args.demos_from:
        return f"-{args.demos_from.name}"
    return "-dapg" if args.dapg else ""


def variant_suffix(args) -> str:
    """What run and figure names add: the demos' source, and a bound on the actions."""
    scale = f"-as{args.demo_action_scale:g}" if args.demo_action_scale is not None else ""
    return source_suffix(args) + scale


def row_key(row: dict) -> tuple:
    """A row replaces the one of the same key: one per env, device, demo source, bound and
    method (a grid run for some methods leaves the others' rows)."""
    return (row["env"], row.get("device", "cpu"), row.get("demo_source"),
            row.get("demo_action_scale"), row.get("method"))  # fmt: skip


def merged(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` with each row of `new` in place of the one of its key (at the end if none), every
    row's keys in `new`'s order."""
    rows = {row_key(r): in_order_of(new[0], r) for r in old}
    rows.update((row_key(r), r) for r in new)
    return list(rows.values())


def in_order_of(template: dict, row: dict) -> dict:
    """`row` with its keys in `template`'s order, and no bound where it names none: the
    generated benchmarks page then shows old rows and new under the same first columns."""
    return {**{k: row.get(k) for k in template if k in row or k == "demo_action_scale"}, **row}


def command_line() -> str:
    return "python benchmarks/rfcl.py " + " ".join(sys.argv[1:])


def demo_source(args) -> str:
    if args.demos_from:
        return DemoSet.load(args.demos_from).info.get("source", "given")
    if args.dapg:
        return "dapg-human"
    return "scripted" if args.env.startswith(("toy:", "metaworld:")) else "planned"


def make_demos(args, demo_dir: Path) -> None:
    if args.demos_from:
        demos = DemoSet.load(args.demos_from)
        if demos.env_id != args.env or len(demos) < args.demos:
            raise SystemExit(f"--demos-from {args.demos_from}: {len(demos)} demos of "
                             f"{demos.env_id}; --env {args.env} --demos {args.demos} needs at "
                             "least that many of that env")  # fmt: skip
        DemoSet(demos.env_id, demos.demos[: args.demos], demos.info).save(demo_dir)
    elif args.dapg:
        demos = import_dapg_demos(args.dapg, args.env, settle=args.settle)
        if len(demos) < args.demos:
            raise SystemExit(f"--demos {args.demos}: {args.dapg} has {len(demos)} that succeed "
                             "when replayed here")  # fmt: skip
        DemoSet(demos.env_id, demos.demos[: args.demos], demos.info).save(demo_dir)
    else:
        make = plan_demos if args.env in PLANNED_TASKS else script_demos
        make(args.env, args.demos, seed=1000, settle=args.settle).save(demo_dir)


LAST_EVALUATIONS = 5


def evaluations(run_dir: Path) -> list[dict]:
    """The run's evaluation rows, in order."""
    return [r for r in read_metrics(run_dir) if "eval/success_at_end" in r]


def success_over_last(evals: list[dict], count: int = LAST_EVALUATIONS) -> float:
    """Success at the end, averaged over the last `count` of `evals`: one evaluation of 20
    episodes swings (a MetaWorld policy went from 0.9 to 0 between its last two), so rows give
    this beside the last one."""
    return float(np.mean([r["eval/success_at_end"] for r in evals[-count:]]))


def steps_per_s(run_dir: Path) -> float:
    rates = [r["train/steps_per_s"] for r in read_metrics(run_dir) if "train/steps_per_s" in r]
    return float(np.median(rates)) if rates else float("nan")


_CPU_CRITICS = dataclasses.replace(RFCL_SAC, hidden_dims=(128, 128, 128))
THROUGHPUT_CONFIGS = {  # (--throughput-configs picks them by the label's first word)
    "paper (10 critics 3x256, an update per step)": {"sac": RFCL_SAC},
    "cpu (10 critics 3x128, an update every 2 steps)": {"sac": _CPU_CRITICS, "update_every": 2},
    "sample-efficient-cpu (10 critics 3x128, 20 critic steps and an actor step every 2 steps)": {
        "sac": dataclasses.replace(_CPU_CRITICS, utd_ratio=20), "update_every": 2},
}  # fmt: skip


def throughput(args, demo_dir: Path) -> list[dict]:
    """Env steps/s of the RFCL loop with each SAC config, with and without the curricula (the
    same loop, every episode from the task's initial states), after a warm start."""
    rows = []
    for label, settings in THROUGHPUT_CONFIGS.items():
        if label.split(" ")[0] not in args.throughput_configs:
            continue
        rates = {}
        for curriculum in (True, False):
            name = f"tp-{args.env.replace(':', '-')}-{len(rows)}-{curriculum}"
            config = RFCLConfig(
                env=args.env, demos=demo_dir, steps=args.throughput_steps, warmstart_steps=500,
                eval_interval=10**9, eval_episodes=1, checkpoint_interval=10**9, log_interval=500,
                runs_dir=args.runs, name=f"{name}-{time.time_ns()}", progress=False,
                reverse_curriculum=curriculum, forward_curriculum=curriculum, **settings,
            )  # fmt: skip
            result = train_rfcl(config)
            rows_ = [r for r in read_metrics(result.run_dir) if "train/steps_per_s" in r]
            sample = rows_[1:] or rows_  # (the first interval holds the compilation)
            rates[curriculum] = float(np.median([r["train/steps_per_s"] for r in sample]))
        rows.append({"config": label, "env": args.env, "steps_per_s": rates[True],
                     "no_curriculum_steps_per_s": rates[False], "device": device_kind(),
                     "command": command_line()})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="toy:maze")
    parser.add_argument("--demos", type=int, default=1, help="demos to learn from")
    parser.add_argument(
        "--preset",
        choices=list(RFCL_PRESETS),
        help="start each run from this preset (--hidden is then ignored)",
    )
    parser.add_argument("--steps", type=int,
                        help="env steps a run (default: the preset's, else 60000)")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256, 256])
    parser.add_argument("--reverse-time-divisor", type=int,
                        help="r in stage 1's time limit 16 + steps left // r (default: the "
                        "preset's, else 1)")  # fmt: skip
    parser.add_argument("--solved-share", type=float,
                        help="stage 1 ends once more than this share of the demos are solved "
                        "(default: the preset's, else 0.9)")  # fmt: skip
    parser.add_argument("--env-workers", type=int,
                        help="processes each run steps its envs in (default: the preset's)")  # fmt: skip
    parser.add_argument("--settle", type=int,
                        help="demos go on past their hold to a state whose success lasts this "
                        "many steps with the last action held (`prefrl demos plan --settle`; "
                        "default 0, with --demos-from the demos' own)")  # fmt: skip
    parser.add_argument("--dapg", type=Path,
                        help="hand_dapg's demo pickle of --env: people's demos, replayed here, "
                        "instead of planned ones (use a --runs of their own)")  # fmt: skip
    parser.add_argument("--demos-from", type=Path,
                        help="a demo folder of --env to take the first --demos from (e.g. "
                        "`prefrl demos record` of a trained policy; use a --runs of their own)")  # fmt: skip
    parser.add_argument("--demo-action-scale", type=float,
                        help="bound every method's actions to this multiple of the demos' "
                        "largest (RFCL's data_action_scale; default: unbounded)")  # fmt: skip
    parser.add_argument("--runs", type=Path, default=Path("logs/rfcl-bench"))
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", type=Path, default=RESULTS.with_name("rfcl-runs"),
                        help="where finished runs' metrics are kept (by --runs name)")  # fmt: skip
    parser.add_argument("--throughput", action="store_true", help="measure env steps/s only")
    parser.add_argument("--throughput-steps", type=int, default=3000)
    parser.add_argument("--throughput-configs", nargs="+",
                        default=[label.split(" ")[0] for label in THROUGHPUT_CONFIGS],
                        choices=[label.split(" ")[0] for label in THROUGHPUT_CONFIGS])  # fmt: skip
    add_grid_flags(parser)
    args = parser.parse_args()

    if args.preset:
        base = RFCL_PRESETS[args.preset].config
        args.steps = args.steps or base.steps
    else:
        args.steps = args.steps or 60_000
        sac = dataclasses.replace(RFCL_SAC, hidden_dims=tuple(args.hidden))
        base = RFCLConfig(sac=sac, eval_interval=max(args.steps // 12, 1000),
                          checkpoint_interval=max(args.steps // 6, 1000))  # fmt: skip
    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    try:  # (a bad value is refused before any demos are made)
        base = dataclasses.replace(base, **overrides)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if args.settle is None:  # (given demos were cut where their maker said)
        given = DemoSet.load(args.demos_from).info if args.demos_from else {}
        args.settle = given.get("settle", 0)
    args.runs.mkdir(parents=True, exist_ok=True)
    demo_dir = args.runs / f"demos-{args.env.replace(':', '-')}-{args.demos}{source_suffix(args)}"
    if not demo_dir.exists():
        make_demos(args, demo_dir)
    made_with = DemoSet.load(demo_dir).info.get("settle", 0)
    if made_with != args.settle:
        raise SystemExit(f"{demo_dir} holds demos made with --settle {made_with}, not "
                         f"{args.settle}: move it aside (and the runs made from it) or match it")  # fmt: skip
    if args.throughput:  # (an accelerator's figures go to a file of their own)
        out = results_path(args.out, device_kind())
        old = json.loads(out.read_text()) if out.exists() else {}
        rows = throughput(args, demo_dir)
        measured = {(r["config"], r["env"]) for r in rows}
        kept = [r for r in old.get("throughput", []) if (r["config"], r["env"]) not in measured]
        for r in kept:  # (rows from before each row named its command)
            r.setdefault("command", old.get("throughput_command"))
        old.pop("throughput_command", None)
        old["throughput"] = kept + rows
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(old, indent=1) + "\n")
        return 0
    configs = {}
    for method in args.methods:
        configs[label(args, method)] = dataclasses.replace(
            base, env=args.env, demos=demo_dir, steps=args.steps,
            eval_episodes=args.eval_episodes, **METHODS[method],
        )  # fmt: skip
    sweep = run_grid(configs, args.seeds, args.runs, args, keep=args.keep)
    rows, device = [], device_kind()
    command = command_line()
    for method in args.methods:
        runs = [sweep.run_dir(label(args, method), seed) for seed in args.seeds]
        evals = [evaluations(r) for r in runs]
        finals = [e[-1] for e in evals]
        at_end = [f["eval/success_at_end"] for f in finals]
        once = [f["eval/success_once"] for f in finals]
        rows.append({
            "env": args.env, "method": method, "demos": args.demos,
            "demo_source": demo_source(args), "demo_action_scale": base.demo_action_scale,
            "env_steps": args.steps,
            "seeds": len(args.seeds), "success_mean": float(np.mean(at_end)),
            "success_std": float(np.std(at_end)), "success_once_mean": float(np.mean(once)),
            "per_seed": at_end,
            "success_last_evaluations_mean": float(np.mean([success_over_last(e) for e in evals])),
            "last_evaluations": LAST_EVALUATIONS,
            "steps_per_s": float(np.mean([steps_per_s(r) for r in runs])),
            "device": device, "sac_hidden": list(base.sac.hidden_dims),
            "reverse_time_divisor": base.reverse_time_divisor, "solved_share": base.solved_share,
            "command": command,
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    for r in old.get("results", []):  # (rows from before each row named its command)
        r.setdefault("command", old.get("command"))
    args.out.write_text(json.dumps({
        **old, "command": command, "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores", "results": merged(old.get("results", []), rows),
    }, indent=1) + "\n")  # fmt: skip
    name = f"rfcl_{args.env.replace(':', '-')}{variant_suffix(args)}"
    plot_success(args, sweep, args.out.with_name(f"{name}.png"))
    if "rfcl" in args.methods:  # (the first seed's starts along its demos, beside the curves)
        curriculum = plot_curriculum(sweep.run_dir(label(args, "rfcl"), args.seeds[0]))
        shutil.copyfile(curriculum, args.out.with_name(f"{name}_curriculum.png"))
    print(f"wrote {args.out}")
    return 0


def plot_success(args, sweep, path: Path) -> None:
    """Success at the end of evaluation episodes over env steps: each method's mean over the
    seeds, with every seed faint behind it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for method, colour in zip(args.methods, ("C0", "C1", "C2", "C3"), strict=False):
        curves = []
        for seed in args.seeds:
            rows = [r for r in read_metrics(sweep.run_dir(label(args, method), seed))
                    if "eval/success_at_end" in r]  # fmt: skip
            curves.append(([r["step"] for r in rows], [r["eval/success_at_end"] for r in rows]))
            ax.plot(*curves[-1], color=colour, alpha=0.25, lw=1)
        n = min(len(c[0]) for c in curves)
        mean = np.mean([c[1][:n] for c in curves], axis=0)
        ax.plot(
            curves[0][0][:n], mean, color=colour, lw=2, label=f"{method} (mean of {len(curves)})"
        )
    ax.set(xlabel="env steps", ylabel="success at the end", ylim=(-0.05, 1.05),
           title=f"{args.env}, {args.demos} {demo_source(args)} demo(s)"
           + ("" if args.demo_action_scale is None
              else f"\nactions within {args.demo_action_scale:g}x the demos' largest"))  # fmt: skip
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
