"""CPL fine-tuning from scripted ratings, with and without the conservative term, against the
starting checkpoint's return, in one invocation.

    python benchmarks/cpl.py --envs Hopper-v5 --seeds 0 1 2

For each env, the SAC run runs/datasets/<env>_sac_s0 (every checkpoint kept) gives the start:
the checkpoint whose evaluation return is nearest half the final one. Segments are collected
from the start checkpoint and its two neighbours at action noise 0, 0.1 and 0.3, rated 1-100 by a
scripted rater (true return, noise 0.05), and a random 500 of the pairs they give are used
(`--sources start`: from the start checkpoint alone, so that the rated segments are not ordered
by training progress and cloning the better ones cannot pass for learning the preference;
`--noise 0.3 --siblings 10 --pair-within siblings`: families of ten segments from one state
each, paired only inside a family, so that the pairs are about actions, not states). Each
seed fine-tunes with the conservative term (MSE to the original, weight 0.01) and without it;
returns are over 10 evaluation episodes on the same seeds for the start and fine-tuned policies.
The fine-tuning runs are a sweep on Ray (`prefrl.sweep`; --jobs N side by side here, --address a
cluster), each a run directory under runs/bench-cpl/runs/: started again, finished runs are
skipped. Results are merged into benchmarks/results/cpl.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
from sweep_grid import add_grid_flags, run_grid

from prefrl.agents.cpl import CPLConfig
from prefrl.envs import make_env
from prefrl.feedback.raters import rate_scripted
from prefrl.finetuning.learner import FinetuneConfig
from prefrl.finetuning.rating_runs import make_rating_run, policy_segments
from prefrl.offline.datasets import eval_returns
from prefrl.rundir.checkpoints import checkpoint_root
from prefrl.training.policies import load_policy

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/cpl.json"


def start_checkpoints(run: Path, step: int | None = None) -> tuple[Path, list[Path]]:
    """(the checkpoint nearest half the final return, or the one at `step`; it and its two
    neighbours)."""
    evals = eval_returns(run)
    final = evals[max(evals)]
    ckpts = sorted(
        (int(p.name.removeprefix("step_")), p)
        for p in checkpoint_root(run).glob("step_*")
        if p.is_dir() and not p.name.endswith(".tmp") and int(p.name[5:]) in evals
    )
    steps = [s for s, _ in ckpts]
    if step is None:
        i = min(range(len(ckpts)), key=lambda k: abs(evals[steps[k]] - 0.5 * final))
    elif step in steps:
        i = steps.index(step)
    else:
        raise SystemExit(f"--start-step {step}: {run} has evaluated checkpoints at {steps}")
    around = [ckpts[k][1] for k in range(max(0, i - 1), min(len(ckpts), i + 2))]
    return ckpts[i][1], around


def behaviour(policy_path: Path, episodes: int = 5, seed: int = 3_000_000) -> dict:
    """What property raters judge, for the deterministic policy over whole episodes: its mean
    squared action (low-action) and its mean observation per dimension (obs:I, low-obs:I)."""
    loaded = load_policy(policy_path)
    env = make_env(loaded.config.env, seed=seed)
    params, actions, observations = loaded.state.actor_params, [], []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            done = False
            while not done:
                action = np.asarray(loaded.sac.act(params, obs, None, 0, deterministic=True))
                observations.append(obs)
                obs, _, term, trunc, _ = env.step(action)
                actions.append(action)
                done = term or trunc
    finally:
        env.close()
    return {
        "mean_squared_action": float((np.stack(actions) ** 2).mean()),
        "mean_observation": np.stack(observations).mean(0).round(4).tolist(),
    }


def row_key(row: dict) -> tuple:
    """One row per setting and start policy (rows from before these were recorded used the
    defaults: λ 0.5, MSE weight 0.01, preference weight 1). The start policy is told apart by its
    evaluated return as well as its path, since a re-trained source run reuses the paths."""
    cons = row["conservative"]
    return (
        row["env"], row["rater"], cons, row["steps"], row.get("bias", 0.5),
        row.get("conservative_weight", 0.01 if cons else 0.0),
        row.get("regulariser", "mse" if cons else "none"), row.get("preference_weight", 1.0),
        row.get("sources", "around"), tuple(row.get("noise", (0.0, 0.1, 0.3))),
        row.get("siblings", 1), row.get("paired", "all"), row["segments"],
        row.get("mean_only", False), row["start_checkpoint"], round(row["start_return"], 1),
        row.get("eval_episodes", 10),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Hopper-v5"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--segments", type=int, default=150)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--rater", default="return")
    parser.add_argument("--rater-noise", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--bias", type=float, default=0.5, help="CPL's λ (1: no bias)")
    parser.add_argument(
        "--conservative-weight", type=float, default=0.01, help="weight of the term when on"
    )
    parser.add_argument("--regulariser", choices=["mse", "kl", "bc"], default="mse")
    parser.add_argument(
        "--preference-weight",
        type=float,
        default=1.0,
        help="0 with --regulariser bc: behaviour cloning of the rated segments alone (a control)",
    )
    parser.add_argument(
        "--sources",
        choices=["around", "start"],
        default="around",
        help="segments from the start checkpoint and its two neighbours, or from the start alone",
    )
    parser.add_argument(
        "--noise", nargs="+", type=float, default=[0.0, 0.1, 0.3], help="collection noise levels"
    )
    parser.add_argument(
        "--siblings",
        type=int,
        default=1,
        help="segments per start state (above 1: families that differ by action noise alone)",
    )
    parser.add_argument(
        "--pair-within",
        choices=["all", "siblings"],
        default="all",
        help="which rated segments pair",
    )
    parser.add_argument(
        "--mean-only",
        action="store_true",
        help="the preferences move the action mean only (CPLConfig.mean_only)",
    )
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument(
        "--start-step",
        type=int,
        default=None,
        help="start from the checkpoint at this step (default: the one nearest half the final "
        "return)",
    )
    parser.add_argument("--runs-dir", default=str(ROOT / "runs/bench-cpl"))
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="the JSON file rows merge into"
    )
    add_grid_flags(parser)
    parser.add_argument(
        "--conservative",
        choices=["both", "on", "off"],
        default="both",
        help="fine-tune with the conservative term, without it, or both",
    )
    args = parser.parse_args()
    command = "python benchmarks/cpl.py " + " ".join(sys.argv[1:])
    runs = Path(args.runs_dir)
    for env in args.envs:
        start, around = start_checkpoints(ROOT / "runs/datasets" / f"{env}_sac_s0", args.start_step)
        tag = args.rater.replace("/", "-") + ("_start-only" if args.sources == "start" else "")
        if args.noise != [0.0, 0.1, 0.3] or args.siblings > 1:
            tag += "_n" + "-".join(f"{n:g}" for n in args.noise) + f"_x{args.siblings}"
        if args.segments != 150:
            tag += f"_{args.segments}seg"
        if args.start_step is not None:
            tag += f"_from{args.start_step}"
        ratings = runs / f"{env}_{tag}_ratings"
        if not (ratings / "config.json").exists():
            shutil.rmtree(ratings, ignore_errors=True)
            sources = around if args.sources == "around" else [start]
            if args.siblings > 1:  # families start from states the first checkpoint reached
                sources = [start] + [c for c in sources if c != start]
            segments, infos = policy_segments(
                sources, args.noise, args.segments, args.length, siblings=args.siblings
            )
            make_rating_run(ratings, env, segments, infos, render_size=None)
            rate_scripted(ratings, args.rater, args.rater_noise)
        settings = {"both": (True, False), "on": (True,), "off": (False,)}[args.conservative]
        variant = ""  # in run names: settings other than the defaults
        if (args.bias, args.conservative_weight) != (0.5, 0.01):
            variant += f"_b{args.bias:g}_w{args.conservative_weight:g}"
        if (args.regulariser, args.preference_weight) != ("mse", 1.0):
            variant += f"_{args.regulariser}_p{args.preference_weight:g}"
        if args.pair_within != "all":
            variant += f"_{args.pair_within}"
        if args.mean_only:
            variant += "_mean-only"
        configs = {}
        for conservative in settings:
            cpl = CPLConfig(
                conservative=args.regulariser if conservative else "none",
                preference_weight=args.preference_weight,
                conservative_weight=args.conservative_weight if conservative else 0.0,
                bias=args.bias,
                mean_only=args.mean_only,
            )
            label = f"{env}_{tag}_{'cons' if conservative else 'free'}_{args.steps}{variant}"
            configs[label] = (conservative, FinetuneConfig(
                policy=start, ratings=ratings, pairs=args.pair_within, cpl=cpl, steps=args.steps,
                max_pairs=args.pairs, eval_episodes=args.eval_episodes,
            ))  # fmt: skip
        sweep = run_grid({k: c for k, (_, c) in configs.items()}, args.seeds, runs, args)
        for label, (conservative, config) in configs.items():
            cpl = config.cpl
            starts, finals, props, episodes = [], [], [], []
            for seed in args.seeds:
                run_dir = sweep.run_dir(label, seed)
                summary = json.loads((run_dir / "summary.json").read_text())
                start_returns = np.asarray(summary["start_returns"])
                finetuned = np.asarray(summary["finetuned_returns"])
                starts.append(float(start_returns.mean()))
                episodes.append({"start": np.round(start_returns, 1).tolist(),
                                 "finetuned": np.round(finetuned, 1).tolist()})  # fmt: skip
                finals.append(float(finetuned.mean()))
                # For every rater: the return rater's runs are the baseline a property rater's
                # change in action size is judged against.
                props.append(behaviour(run_dir))
                print(
                    f"{env} {'conservative' if conservative else 'no conservative term'} seed "
                    f"{seed}: {starts[-1]:.1f} -> {finals[-1]:.1f}"
                )
            row = {
                "env": env,
                "rater": args.rater,
                "pairs": args.pairs,
                "segments": args.segments,
                "conservative": conservative,
                "seeds": len(args.seeds),
                "start_checkpoint": str(start.relative_to(ROOT)),
                "start_return": float(np.mean(starts)),
                "finetuned_return_mean": float(np.mean(finals)),
                "finetuned_return_std": float(np.std(finals)),
                "finetuned_return_min": float(np.min(finals)),
                "finetuned_returns": finals,
                "episode_returns": episodes,  # per seed: each evaluation episode, same env seeds
                "ratio": float(np.mean(finals) / np.mean(starts)),
                "steps": args.steps,
                "bias": cpl.bias,
                "regulariser": cpl.conservative,
                "preference_weight": cpl.preference_weight,
                "conservative_weight": cpl.conservative_weight,
                "sources": args.sources,
                "noise": args.noise,
                "siblings": args.siblings,
                "paired": args.pair_within,
                "mean_only": args.mean_only,
                "eval_episodes": args.eval_episodes,
                "command": command,
            }
            if props:
                start_props = behaviour(start)
                row["mean_squared_action_start"] = start_props["mean_squared_action"]
                row["mean_squared_action_finetuned"] = [p["mean_squared_action"] for p in props]
                row["mean_observation_start"] = start_props["mean_observation"]
                row["mean_observation_finetuned"] = [p["mean_observation"] for p in props]
            # Read at write time: runs side by side each add their rows, none drops another's.
            existing = (
                json.loads(args.results.read_text()) if args.results.exists() else {"results": []}
            )
            rows = {row_key(r): r for r in existing["results"]}
            rows[row_key(row)] = row
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(
                json.dumps({"command": command, "results": list(rows.values())}, indent=2) + "\n"
            )
            print(
                f"{env}: start {row['start_return']:.1f}, fine-tuned "
                f"{row['finetuned_return_mean']:.1f} +- {row['finetuned_return_std']:.1f} (min "
                f"{row['finetuned_return_min']:.1f}), ratio {row['ratio']:.2f}"
            )


if __name__ == "__main__":
    main()
