"""Learning from preferences against SAC on the true reward, run side by side.

For each environment: PEBBLE (SAC on a reward learned from scripted labels) and SAC on the env's
own reward, with the same agent settings, steps and seeds, in this invocation. Reports the final
evaluation return of each (mean +- std over seeds), their ratio, and the preference loop's
overhead: the share of the preference run's wall time spent selecting queries, labelling, fitting
the reward model and relabelling the buffer (the rest is what plain SAC does too).

    python benchmarks/label_efficiency.py --envs Pendulum-v1 --seeds 0 1 2
    python benchmarks/label_efficiency.py --envs HalfCheetah-v5 --teacher oracle --seeds 0 1 2
    python benchmarks/label_efficiency.py --envs dmc:walker-walk --labels 100 --methods pebble qpa

The grid (envs x {each method of --methods, true reward} x seeds) runs as a sweep on Ray (`prefrl.sweep`):
--jobs N runs N side by side here, --address on a cluster. Runs go to
runs/bench-labels/runs/; stopped and started again, finished runs are reused and stopped ones
resume. Each run's metrics are kept in benchmarks/results/label-efficiency-runs (--keep) as it
ends, so a grid longer than one machine's life goes on, on the next, from the runs it finished.
Wall seconds are a run's training time from its metrics' timestamps (stops and resumes counted
once, without the time it stood still). Results are merged into
benchmarks/results/label_efficiency.json (one row per env, teacher, method and budget).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from sweep_grid import add_grid_flags, run_grid

from prefrl.agents import SACConfig
from prefrl.feedback import ScheduleConfig, TeacherConfig
from prefrl.online.learner import OnlineConfig
from prefrl.presets import ONLINE_PRESETS, QPA_CODE, QPA_PARTS
from prefrl.reward import RewardConfig
from prefrl.rl.config import RLConfig
from prefrl.rundir.metrics import read_metrics

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/label_efficiency.json"

# env -> preference config at the budgets. HalfCheetah: PEBBLE's reward model (3 x 3x256,
# tanh) with rl-teacher's front-loaded annealed schedule, a fit every 10k steps, each of up to
# 20 epochs. Measured (README): these full fits reached 85% of SAC-true with fitting 31% of the
# wall time (seed 0); refits capped at 5 epochs (variant capped-refits) 68% with 23%; a linear
# output at half the width (variant linear-mid-reward) 81% with 19% (seeds 0, 1 and 2).
SETTINGS = {
    "Pendulum-v1": dataclasses.replace(ONLINE_PRESETS["quickstart"].config, steps=20_000),
    "HalfCheetah-v5": OnlineConfig(
        env="HalfCheetah-v5",
        steps=300_000,
        warmstart_steps=10_000,
        schedule=ScheduleConfig(kind="annealed", budget=1000, interval=10_000),
        checkpoint_interval=25_000,
    ),
    # An env that ends episodes when the robot falls (OnlineConfig.termination: by default the
    # episode ends and its unfinished last segment is dropped; the variants below try the
    # others). 100k steps: SAC on the true reward is far from converged there, but falling
    # early or not shows by then.
    "Hopper-v5": OnlineConfig(
        env="Hopper-v5",
        steps=100_000,
        warmstart_steps=5_000,
        schedule=ScheduleConfig(kind="annealed", budget=500, interval=10_000),
        checkpoint_interval=25_000,
    ),
    # PEBBLE's walker schedule (9k unsupervised steps, sessions of 50 every 20k) with the 2x256
    # SAC of the HalfCheetah runs on both sides: B-Pref's 2x1024 agent, batch 1024, would take
    # many hours per 500k-step run on this CPU. Full refits: one every 20k steps costs little, and
    # capped refits cost HalfCheetah a fifth of its return.
    "dmc:walker-walk": dataclasses.replace(
        ONLINE_PRESETS["pebble-walker"].config,
        sac=SACConfig(),
        checkpoint_interval=25_000,
    ),
    # QPA's other 100-label task, with the walker's settings (its own: 1M steps, 20k sessions).
    "dmc:cheetah-run": dataclasses.replace(
        ONLINE_PRESETS["pebble-walker"].config,
        env="dmc:cheetah-run",
        sac=SACConfig(),
        checkpoint_interval=25_000,
    ),
}

# Other settings to compare against SETTINGS (`--variant NAME`; runs and rows carry the name).
VARIANTS = {
    # Refits warm-start and take at most 5 epochs (at least 50 gradient steps): cheaper, and a
    # fifth less return.
    "capped-refits": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"], reward=RewardConfig(refit_epochs=5)
        ),
    },
    # The full fits in a worker process beside the agent (`fit_lag`), each used 10k steps (one
    # label interval) after it began: on two cores the agent keeps one and the fit the other.
    "background-fits": {
        "HalfCheetah-v5": dataclasses.replace(SETTINGS["HalfCheetah-v5"], fit_lag=10_000),
    },
    # The full fits, but only once the new labels are a tenth of those fitted (or the budget's
    # last): the annealed schedule's late sessions add 2-20 labels each. Every label is trained
    # on (out-of-bag validation, as PEBBLE) instead of holding out 1/e.
    "lean-fits": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"], refit_growth=0.1, reward=RewardConfig(val_fraction=0.0)
        ),
    },
    # Christiano's 2x64 reward nets (about 1/100 of the arithmetic per comparison-epoch of
    # 3 x 3x256), so every fit can take its full 20 epochs without the overhead of the
    # 20-epoch run.
    "small-reward": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"], reward=RewardConfig(hidden_dims=(64, 64))
        ),
    },
    # A linear output instead of PEBBLE's tanh (Christiano's choice): HalfCheetah's reward grows
    # with speed without bound, and at the end of the runs above 40-66% of the tanh outputs on
    # the newest segments were within 5% of its ceiling, where faster running earns no more.
    "linear-reward": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"], reward=RewardConfig(output="linear")
        ),
    },
    # The same at half the width (3 x 3x128: less than half the time per comparison-epoch).
    "linear-mid-reward": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"],
            reward=RewardConfig(output="linear", hidden_dims=(128, 128, 128)),
        ),
    },
    # The same, training on every label (out-of-bag validation) instead of holding out 1/e, for
    # 13 epochs a fit: the same arithmetic per fit (13 x 1000 = 20 x 1000 (1 - 1/e)).
    "linear-mid-all-labels": {
        "HalfCheetah-v5": dataclasses.replace(
            SETTINGS["HalfCheetah-v5"],
            reward=RewardConfig(
                output="linear", hidden_dims=(128, 128, 128), val_fraction=0.0, max_epochs=13
            ),
        ),
    },
    # The fall shown to the teacher: the last segment padded with the final state held still,
    # and the end worth that state's learned reward to the time limit.
    "termination-absorbing": {
        "Hopper-v5": dataclasses.replace(SETTINGS["Hopper-v5"], termination="absorbing"),
    },
    # A fallen hopper goes on to the time limit (terminate_when_unhealthy=False).
    "termination-continue": {
        "Hopper-v5": dataclasses.replace(SETTINGS["Hopper-v5"], termination="continue"),
    },
    # B-Pref's released walker script for the 1000-label budget (preset pebble-walker-1000):
    # sessions of 100 (not 50) every 20k steps, so the budget is spent by 190k, and fits of up
    # to 50 epochs (reward_update=50, stopping at 97% training accuracy); the 2x256 agent.
    "bpref-script": {
        "dmc:walker-walk": dataclasses.replace(
            ONLINE_PRESETS["pebble-walker-1000"].config,
            sac=SACConfig(),
            checkpoint_interval=25_000,
        ),
    },
}


def _qpa_with_reward(config: OnlineConfig, **changes) -> OnlineConfig:
    """`config` with QPA's parts, its reward model's settings changed by `changes`."""
    reward = dataclasses.replace(QPA_PARTS["reward"], **changes)
    return dataclasses.replace(config, **{**QPA_PARTS, "reward": reward})


# Ways to learn from the same labels, run side by side on the same seeds and budgets (--methods).
METHODS = {
    "pebble": lambda config: config,
    # QPA (Hu et al. 2024): policy-aligned queries, hybrid replay, 20 crops per label, one reward
    # network fitted on every label (presets.QPA_PARTS).
    "qpa": lambda config: dataclasses.replace(config, **QPA_PARTS),
    # QPA with its code's dm_control fit rule: stop once the accuracy over the whole fit so far
    # reaches 98%, checked after every step (no minimum), rather than 97% over an epoch.
    "qpa-fit-stop": lambda config: _qpa_with_reward(
        config, stop_measured_over="fit", stop_accuracy=0.98, min_steps=1
    ),
    # QPA without its label augmentation (each labelled pair trained on once, whole): beside
    # "qpa", what the crops add, and under a teacher that errs, what they do to robustness.
    "qpa-no-crops": lambda config: _qpa_with_reward(config, crops=0),
    # QPA with PEBBLE's three reward networks (each on every label, its own start and crops),
    # the agent trained on their mean: whether one network's errors are what makes QPA's
    # outcome swing with the seed on the walker (656 and 206 from 100 labels).
    "qpa-ensemble": lambda config: _qpa_with_reward(config, members=3),
    # QPA with its 10 sessions 45k steps apart (the last at about 415k) rather than 20k (spent
    # by 190k): its learned rewards, taught on the agent's early behaviour only, rate their own
    # runs' segments above good walking (tools/learned_reward_ranks.py); later sessions show
    # the teacher what the agent does once it walks.
    "qpa-spread": lambda config: dataclasses.replace(
        config, **QPA_PARTS, schedule=dataclasses.replace(config.schedule, interval=45_000)
    ),
    # QPA with its code's rule for hybrid replay: half of each batch from the last episodes only
    # while labels are still asked (spent by 190k on the walker), then all from the whole buffer;
    # "qpa" keeps it for the whole run (as its rows were measured). The qpa presets take this.
    "qpa-replay-budget": lambda config: dataclasses.replace(
        config, **QPA_PARTS, hybrid_replay_until_budget=True
    ),
    # QPA with every rule of its code that prefrl's defaults change (presets.QPA_CODE, as the
    # qpa presets): the replay rule above, and the raw tanh output as the agent's reward, fitted
    # by plain cross-entropy (prefrl normalises each fit's output and mixes 10% random answers).
    "qpa-code": lambda config: dataclasses.replace(config, **QPA_CODE),
    # QPA with the settings of B-Pref's SAC that cost nothing more on a CPU (learning rates 5e-4,
    # the temperature's 1e-4 from 0.1), its 2x1024 networks and batches of 1024 left out (16x
    # the update): whether the agent's settings keep QPA's walker short of its paper.
    "qpa-bpref-sac": lambda config: dataclasses.replace(
        config,
        **QPA_PARTS,
        sac=dataclasses.replace(
            ONLINE_PRESETS["pebble-walker"].config.sac,
            hidden_dims=config.sac.hidden_dims,
            batch_size=config.sac.batch_size,
        ),
    ),
    # QPA as its code runs (the qpa-walker-100 preset's parts): QPA_CODE's rules with B-Pref's
    # whole SAC, 2x1024 networks and batches of 1024 (about 60x the arithmetic of an update of
    # the 2x256 agent at 256: a GPU row, benchmarks/gpu_rows.py). The one difference from QPA's
    # agent that the CPU rows above leave untried.
    "qpa-preset": lambda config: dataclasses.replace(
        config, **QPA_CODE, sac=ONLINE_PRESETS["qpa-walker-100"].config.sac
    ),
}


def _with_budget(config: OnlineConfig, labels: int | None) -> OnlineConfig:
    """`config` with a label budget of `labels`, spent in sessions of a tenth of it."""
    if labels is None:
        return config
    session = max(1, labels // 10) if config.schedule.kind == "sessions" else None
    schedule = dataclasses.replace(config.schedule, budget=labels,
                                   **({"session_size": session} if session else {}))  # fmt: skip
    return dataclasses.replace(config, schedule=schedule)


def _final_return(run_dir: Path) -> float:
    rows = [r for r in read_metrics(run_dir) if "eval/return_mean" in r]
    return float(rows[-1]["eval/return_mean"])


def _curve_mean(run_dir: Path) -> float:
    """Mean of every evaluation's return over the run (the area under the learning curve per
    evaluation): steadier than the last evaluation alone where returns swing between them."""
    rows = [r for r in _fresh_rows(run_dir) if "eval/return_mean" in r]
    return float(np.mean([r["eval/return_mean"] for r in rows]))


def _fresh_rows(run_dir: Path) -> list[dict]:
    """Metrics rows in the order written, without the steps a resumed run did over again."""
    rows, furthest = [], -1
    for row in read_metrics(run_dir):
        if row["step"] >= furthest:
            rows.append(row)
            furthest = row["step"]
    return rows


# A gap longer than this between two metrics rows is a stop and a resume, not training time.
_RESUME_GAP_S = 900.0


def _loop_seconds(run_dir: Path) -> tuple[float, float, bool]:
    """(seconds in the preference machinery: query selection + labelling + polling, reward fits
    (or waits for a fit running beside the agent), relabelling; wall seconds of training;
    whether query selection and labelling were timed), from the run's metrics, so a run stopped
    and resumed is counted once and without the time it stood still. (Fits before
    `feedback/seconds` was logged count their fit and relabel time only.)"""
    rows = _fresh_rows(run_dir)
    timed = all("feedback/seconds" in r for r in rows if "reward/fit_seconds" in r)
    loop = sum(
        # A fit in the background costs the loop only the time it waited for it.
        r.get("reward/fit_wait_seconds", r.get("reward/fit_seconds", 0.0))
        + r.get("reward/relabel_seconds", 0.0)
        + r.get("feedback/seconds", 0.0)
        for r in rows
    )
    gaps = np.diff([r["time"] for r in rows])
    return float(loop), float(gaps[gaps < _RESUME_GAP_S].sum()), timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1"], choices=list(SETTINGS))
    parser.add_argument("--teacher", default="oracle")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="override the budget's steps")
    parser.add_argument("--runs-dir", default=str(ROOT / "runs/bench-labels"))
    add_grid_flags(parser)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file to merge into")
    parser.add_argument("--keep", type=Path,
                        help="where each run's metrics are kept as it ends, by --runs-dir name "
                        "(default: label-efficiency-runs beside --out; commit them): a new "
                        "machine's grid restores them and runs the others")  # fmt: skip
    parser.add_argument(
        "--variant",
        choices=list(VARIANTS),
        help="other settings (see VARIANTS); SAC on the true reward is the same run as without",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["pebble"],
        choices=list(METHODS),
        help="ways to learn from the labels, each beside SAC on the true reward",
    )
    parser.add_argument("--labels", type=int, help="override the label budget (sessions of a "
                        "tenth of it where the schedule has sessions)")  # fmt: skip
    parser.add_argument(
        "--only",
        choices=["pref", "true"],
        help="train only one side; a later plain invocation reuses the finished runs and "
        "writes the results",
    )
    args = parser.parse_args()
    runs = Path(args.runs_dir)
    command = "python benchmarks/label_efficiency.py " + " ".join(sys.argv[1:])

    suffix = f"-{args.variant}" if args.variant else ""
    configs, sides = {}, {}
    for env in args.envs:
        if args.variant and env not in VARIANTS[args.variant]:
            raise SystemExit(f"variant {args.variant!r} has no settings for {env}")
        base = VARIANTS[args.variant][env] if args.variant else SETTINGS[env]
        p = dataclasses.replace(_with_budget(base, args.labels), teacher=TeacherConfig(args.teacher),
                                steps=args.steps or base.steps, video=False)  # fmt: skip
        true = RLConfig(
            env=env, steps=p.steps, warmstart_steps=p.warmstart_steps, sac=p.sac,
            eval_interval=p.eval_interval, eval_episodes=p.eval_episodes, video=False,
            checkpoint_interval=p.checkpoint_interval, buffer_size=p.buffer_size,
        )  # fmt: skip
        tag = env.replace(":", "-")
        budget = "" if args.labels is None else f"_l{args.labels}"
        for method in args.methods:  # (PEBBLE's runs keep the names they had before methods)
            label = f"{tag}_{args.teacher}{suffix}{budget}" + (f"_{method}" if method != "pebble"
                                                               else "")  # fmt: skip
            sides[env, method] = (METHODS[method](p), label, f"{tag}_true")
            if args.only != "true":
                configs[label] = sides[env, method][0]
        if args.only != "pref":
            configs[f"{tag}_true"] = true
    run_grid(configs, args.seeds, runs, args,
             keep=args.keep or args.out.with_name("label-efficiency-runs"))  # fmt: skip
    if args.only:
        return  # one side only: nothing to compare yet
    rows: dict[tuple, dict] = {}  # this invocation's; merged into the file when written
    runs = runs / "runs"
    for (env, method), (pref, pref_label, true_label) in sides.items():
        pref_names = [f"{pref_label}_s{seed}" for seed in args.seeds]
        true_names = [f"{true_label}_s{seed}" for seed in args.seeds]
        pref_returns = [_final_return(runs / n) for n in pref_names]
        true_returns = [_final_return(runs / n) for n in true_names]
        timing = [_loop_seconds(runs / n) for n in pref_names]
        loop_share = [loop_s / active_s for loop_s, active_s, _ in timing]
        feedback_timed = [timed for *_, timed in timing]
        pref_wall = [active_s for _, active_s, _ in timing]
        true_wall = [_loop_seconds(runs / n)[1] for n in true_names]
        pm, tm = float(np.mean(pref_returns)), float(np.mean(true_returns))
        rows[(env, args.teacher, args.variant, method, pref.schedule.budget)] = {
            "env": env,
            "teacher": args.teacher,
            "method": method,
            **({"variant": args.variant} if args.variant else {}),
            "labels": pref.schedule.budget,
            "steps": pref.steps,
            "seeds": len(args.seeds),
            "pref_return_mean": pm,
            "pref_return_std": float(np.std(pref_returns)),
            "true_reward_return_mean": tm,
            "true_reward_return_std": float(np.std(true_returns)),
            # pref / true as specified; with negative returns (Pendulum) below 1 is better.
            "ratio": pm / tm,
            "pref_returns": pref_returns,
            "true_reward_returns": true_returns,
            "pref_curve_means": [_curve_mean(runs / n) for n in pref_names],
            "true_reward_curve_means": [_curve_mean(runs / n) for n in true_names],
            "pref_wall_s": pref_wall,
            "true_reward_wall_s": true_wall,
            # Share of the preference run's wall time spent in query selection, labelling,
            # fitting and relabelling (from its metrics: valid across stops and resumes).
            "loop_overhead": float(np.mean(loop_share)),
            "loop_overhead_per_seed": loop_share,
            # Wall seconds of the preference machinery per label (selection, fits with their
            # augmentation, relabelling), the cost a method adds for what each answer buys.
            "loop_seconds_per_label": float(np.mean([s for s, _, _ in timing]))
            / pref.schedule.budget,
            "loop_overhead_includes_query_selection": all(feedback_timed),
            "command": command,
        }
        r = rows[(env, args.teacher, args.variant, method, pref.schedule.budget)]
        print(
            f"{env} [{method}, {args.teacher}, {r['labels']} labels, {r['steps']:,} steps, {r['seeds']} "
            f"seeds]: preferences {pm:.1f} +- {r['pref_return_std']:.1f}, true reward {tm:.1f} "
            f"+- {r['true_reward_return_std']:.1f}, ratio {r['ratio']:.2f}, loop overhead "
            f"{100 * r['loop_overhead']:.0f}% of wall time"
        )
    # Read at the end, not the start: runs of hours side by side each add their own rows.
    existing = json.loads(args.out.read_text()) if args.out.exists() else {"results": []}
    merged = {(r["env"], r["teacher"], r.get("variant"), r.get("method", "pebble"), r["labels"]): r
              for r in existing["results"]}  # fmt: skip
    merged.update(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"command": command, "results": list(merged.values())}, indent=2) + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
