"""Offline learning from preferences: IQL on the PT, MR and NMR rewards against IQL on the true
reward, same dataset, same queries, same IQL settings and seeds, in this invocation; and offline
CPL (`--rewards cpl`: behaviour cloning, then CPL on the same labelled queries, no reward model).

    python benchmarks/offline.py --envs Hopper-v5 --teachers oracle --seeds 0
    python benchmarks/offline.py --throughput

For each env, the medium-replay dataset is made (once) from the SAC run
runs/datasets/<env>_sac_s0 (`prefrl rl --env <env> --steps 300000 --keep-checkpoints 0
--checkpoint-interval 25000 --runs-dir runs/datasets --name <env>_sac_s0`) into
datasets/bench/<env>-medium-replay; 500 queries of 100 steps are sampled (seed 0) and labelled
by each teacher. The runs are a sweep on Ray (`prefrl.sweep`; --jobs N side by side here,
--address a cluster, --gpus-per-run a share of a GPU), each a run directory under
runs/bench-offline/runs/: started again, finished runs are skipped and stopped IQL runs resume.
Results are merged into benchmarks/results/offline.json, one row per dataset, teacher and reward.

`--plot` draws the rows of one IQL budget (`--iql-steps`) from the results file: per dataset,
each reward's mean and its seeds, by teacher, against the true reward's mean, written beside the
results as offline_<steps>.png.

`--throughput` measures reward-model training (pairs/s, at the published sizes: 256-wide, batch
256 pairs of 100-step segments) and IQL updates/s, written to
benchmarks/results/offline_throughput.json.

This CPU cannot run the published budgets (IQL 1M steps; PT trained for thousands of steps: one
PT step on 256 pairs takes seconds here); --iql-steps and --reward-epochs say what was run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from device_results import device_kind, results_path
from sweep_grid import add_grid_flags, run_grid

from prefrl.agents.iql import IQL, IQLConfig
from prefrl.data.dataset import OfflineDataset
from prefrl.feedback.dataset_queries import label_queries, sample_queries
from prefrl.feedback.teachers import TeacherConfig
from prefrl.offline.cpl import OfflineCPLConfig
from prefrl.offline.datasets import collect_dataset
from prefrl.offline.learner import OfflineConfig
from prefrl.reward.segment_models import SegmentRewardConfig
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.provenance import read_sessions

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/offline.json"
THROUGHPUT = ROOT / "benchmarks/results/offline_throughput.json"
REWARDS = ("true", "true-like-learned", "mr", "nmr", "pt", "cpl")
LEARNED = ("mr", "nmr", "pt", "true-like-learned")
"""IQL on the true reward or on a learned one; cpl: offline CPL (BC, then CPL) on the same labels;
true-like-learned: the true reward given what a learned one gets (centred, +0.5), a control."""


def dataset_for(env: str) -> Path:
    out = ROOT / "datasets/bench" / f"{env}-medium-replay"
    if not (out / "data").exists():
        run = ROOT / "runs/datasets" / f"{env}_sac_s0"
        if not run.exists():
            raise SystemExit(
                f"no dataset {out} and no SAC run {run} to make it from: first run\n"
                f"  prefrl rl --env {env} --steps 300000 --seed 0 --no-video "
                "--checkpoint-interval 25000 --keep-checkpoints 0 --runs-dir runs/datasets "
                f"--name {env}_sac_s0"
            )
        data = collect_dataset(run, "medium-replay")
        data.name = out.name
        data.save(out)
    return out


def queries_for(dataset_dir: Path, teacher: str, num: int, length: int) -> Path:
    path = dataset_dir.parent / f"{dataset_dir.name}_{teacher}_{num}x{length}.json"
    if not path.exists():
        data = OfflineDataset.load(dataset_dir)
        queries = sample_queries(data, num, length, seed=0)
        label_queries(queries, data, TeacherConfig(teacher), seed=0).save(path)
    return path


def run_devices(run_dir: Path) -> set[str]:
    """The devices a run was trained on, from its sessions.jsonl (empty for runs made before it)."""
    return {d for s in read_sessions(run_dir) for d in s.get("devices", [])[:1]}


def run_label(dataset: Path, labels: Path | None, reward: str, args) -> str:
    """A config's name in the sweep (its runs: <label>_s<seed>); the IQL budget is in it, so
    that another --iql-steps makes other runs rather than clash with these."""
    label = f"{dataset.name}_{args_teacher(labels)}_{reward}"
    if reward == "cpl":
        return label + (f"_bc{args.bc_steps}_cpl{args.cpl_steps}"
                        if (args.bc_steps, args.cpl_steps) != (20_000, 1000) else "")  # fmt: skip
    label += f"_iql{args.iql_steps}"
    if args.as_learned and reward in LEARNED:
        label += "_as-learned"
    return label


def run_config(dataset: Path, labels: Path | None, reward: str, args):
    """The training config of one planned run (its seed is the sweep's)."""
    if reward == "cpl":
        return OfflineCPLConfig(dataset=dataset, labels=labels, bc_steps=args.bc_steps,
                                steps=args.cpl_steps)  # fmt: skip
    true = reward in ("true", "true-like-learned")
    return OfflineConfig(
        dataset=dataset,
        labels=None if true else labels,
        reward="true" if true else reward,
        reward_model=SegmentRewardConfig(kind="pt" if true else reward, epochs=args.reward_epochs),
        center_reward=not args.as_learned,
        true_like_learned=reward == "true-like-learned",
        steps=args.iql_steps,
        eval_interval=args.eval_interval,
        checkpoint_interval=args.eval_interval,
    )


def run_score(run_dir: Path, reward: str) -> tuple[float, dict]:
    """A finished run's final score and what else its row reports, read from its directory."""
    if reward == "cpl":
        info = json.loads((run_dir / "summary.json").read_text())
        score = info["eval/score_mean"]
    else:
        info_path = run_dir / "reward_metrics.json"
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        # IQL's score moves a lot between evaluations at this budget: the last three say how much.
        evals = [float(r["eval/score_mean"]) for r in read_metrics(run_dir)
                 if "eval/score_mean" in r]  # fmt: skip
        score = evals[-1]
        info["score_last3"] = float(np.mean(evals[-3:]))
    info["devices"] = sorted(run_devices(run_dir))
    return score, info


def run_all(plan: dict[tuple, tuple], args) -> dict[tuple, tuple[float, dict]]:
    """Every planned run as a sweep on Ray (`prefrl.sweep`): `--jobs` side by side here (or on
    the cluster at `--address`), `--gpus-per-run` of a GPU each where there is one. Started
    again, finished runs are skipped and stopped IQL runs resume from their checkpoints."""
    configs = {run_label(*job, args): run_config(*job, args) for job in plan.values()}
    seeds = sorted({key[-1] for key in plan})
    run_grid(configs, seeds, Path(args.runs_dir), args)
    runs = Path(args.runs_dir) / "runs"
    return {key: run_score(runs / f"{run_label(*job, args)}_s{key[-1]}", job[2])
            for key, job in plan.items()}  # fmt: skip


def row_key(row: dict) -> tuple:
    """Rows of the same data, teacher and reward at another IQL budget or offset stay apart."""
    return (
        row["dataset"],
        row["teacher"],
        row["reward"],
        row.get("reward_offset"),
        row.get("iql_steps"),
    )


def covered_by(old: dict | None, new: dict) -> bool:
    """Whether `old` already holds `new`: the same runs' scores over a superset of its seeds (so
    an invocation over fewer seeds, e.g. the true reward's 3 beside a teacher's, keeps the row
    over 5)."""
    if old is None or "seed_ids" not in old:
        return False
    by_seed = dict(zip(old["seed_ids"], old["scores"]))
    return len(old["seed_ids"]) > len(new["seed_ids"]) and all(
        by_seed.get(s) == score for s, score in zip(new["seed_ids"], new["scores"])
    )


def args_teacher(labels: Path | None) -> str:
    return "none" if labels is None else labels.stem.split("_")[1]


def benchmark(args) -> None:
    results = Path(args.results)
    existing = json.loads(results.read_text()) if results.exists() else {"results": []}
    for r in existing["results"]:  # rows from before centring existed were as learned
        if r["reward"] in LEARNED:
            r.setdefault("reward_offset", "as learned")
        r.setdefault("device", "cpu")  # rows from before the field all ran on the 2-core CPU
    rows = {row_key(r): r for r in existing["results"]}
    offset = "as learned" if args.as_learned else "centred"
    command = "python benchmarks/offline.py " + " ".join(sys.argv[1:])
    # Every run this invocation needs, once each (the true-reward runs serve every teacher).
    datasets = {env: dataset_for(env) for env in args.envs}
    plan: dict[tuple, tuple] = {}
    for env, dataset in datasets.items():
        for seed in args.seeds:
            plan[(env, "true", "none", seed)] = (dataset, None, "true")
        for teacher in args.teachers:
            labels = queries_for(dataset, teacher, args.queries, args.length)
            for reward in args.rewards:
                used = None if reward.startswith("true") else labels
                for seed in args.seeds:
                    plan[(env, reward, args_teacher(used), seed)] = (dataset, used, reward)
    done = run_all(plan, args)
    here = device_kind()
    for env, dataset in datasets.items():
        true_scores = [done[(env, "true", "none", s)][0] for s in args.seeds]
        for teacher in args.teachers:
            for reward in args.rewards:
                row_teacher = "none" if reward.startswith("true") else teacher
                scores, infos = zip(*(done[(env, reward, row_teacher, s)] for s in args.seeds))
                # Runs from before sessions.jsonl existed count as made on this machine.
                device = " + ".join(sorted({d for i in infos for d in i["devices"] or [here]}))
                row = {
                    "dataset": dataset.name,
                    "teacher": row_teacher,
                    "queries": args.queries if not reward.startswith("true") else 0,
                    "query_length": args.length,
                    "reward": reward,
                    "seeds": len(scores),
                    "seed_ids": list(args.seeds),
                    "score_mean": float(np.mean(scores)),
                    "score_std": float(np.std(scores)),
                    "scores": [float(x) for x in scores],
                    "score_last3_mean": [i.get("score_last3") for i in infos],
                    "iql_steps": args.iql_steps,
                    "reward_epochs": args.reward_epochs if reward in ("mr", "nmr", "pt") else None,
                    "true_score_mean": float(np.mean(true_scores)),
                    "ratio_to_true": float(np.mean(scores) / np.mean(true_scores)),
                    "reward_val_accuracy": [i.get("reward/val_accuracy") for i in infos],
                    "reward_return_correlation": [
                        i.get("reward/episode_return_correlation") for i in infos
                    ],
                    "reward_offset": offset if reward in LEARNED else None,
                    "reward_scaled_mean": [i.get("reward/scaled_mean") for i in infos],
                    "device": device,
                    "command": command,
                }
                if reward == "cpl":
                    row.update(
                        iql_steps=None,
                        bc_steps=args.bc_steps,
                        cpl_steps=args.cpl_steps,
                        bc_scores=[i["eval/bc_score_mean"] for i in infos],
                        cpl_val_accuracy=[i.get("cpl/val_accuracy") for i in infos],
                    )
                if not covered_by(rows.get(row_key(row)), row):
                    rows[row_key(row)] = row
                print(
                    f"{dataset.name} {row['teacher']:>7} {reward:>4}: score "
                    f"{row['score_mean']:.1f} +- {row['score_std']:.1f} over {len(scores)} seeds "
                    f"({row['ratio_to_true']:.2f}x IQL on the true reward)"
                )
                results.parent.mkdir(parents=True, exist_ok=True)
                results.write_text(
                    json.dumps({"command": command, "results": list(rows.values())}, indent=2)
                    + "\n"
                )


def throughput(args) -> None:
    """Pairs/s of one training step per reward model at the published sizes, and IQL updates/s;
    each function jitted and warmed up first, median of --repeats timed calls."""
    from prefrl.nn.sequence import LSTMReward, MarkovReward, PreferenceTransformer

    b, t, obs_dim, act_dim = args.batch, args.length, 11, 3  # Hopper's sizes
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(2, b, t, obs_dim)), jnp.float32)
    act = jnp.asarray(rng.uniform(-1, 1, (2, b, t, act_dim)), jnp.float32)
    steps = jnp.broadcast_to(jnp.arange(1, t + 1), (b, t))
    mask = jnp.ones((b, t))
    y = jnp.asarray(rng.integers(0, 2, b), jnp.float32)
    out = {
        "command": "python benchmarks/offline.py " + " ".join(sys.argv[1:]),
        "batch_pairs": b,
        "segment_length": t,
        "obs_dim": obs_dim,
        "action_dim": act_dim,
        "device": device_kind(),
    }
    nets = {"mr": MarkovReward(), "nmr": LSTMReward(), "pt": PreferenceTransformer()}
    for kind in args.models:
        net = nets[kind]
        params = net.init(jax.random.key(0), obs[0], act[0], steps, mask)

        def score(p, o, a, key, net=net):
            r = net.apply(p, o, a, steps, mask, True, rngs={"dropout": key})
            return r[1].mean(-1) if isinstance(r, tuple) else r.sum(-1)

        def loss(p, key, score=score):
            k1, k2 = jax.random.split(key)
            logits = score(p, obs[1], act[1], k2) - score(p, obs[0], act[0], k1)
            return jnp.mean(jnp.logaddexp(0, logits) - y * logits)

        grad = jax.jit(jax.grad(loss))
        seconds = _median_seconds(
            lambda grad=grad, params=params: grad(params, jax.random.key(1)), args.repeats
        )
        out[f"{kind}_pairs_per_s"] = b / seconds
        print(f"{kind}: {b / seconds:,.1f} pairs/s ({seconds * 1000:.0f} ms per step of {b} pairs)")
    n = 200_000
    iql = IQL(IQLConfig(), obs_dim, act_dim)
    state = iql.init(jax.random.key(0))
    data = IQL.to_device(
        rng.normal(size=(n, obs_dim)),
        rng.uniform(-1, 1, (n, act_dim)),
        rng.normal(size=n),
        rng.normal(size=(n, obs_dim)),
        np.zeros(n),
    )
    calls = 1000

    def step():
        nonlocal state
        state, _ = iql.update(state, data, jax.random.key(2), steps=calls)
        return state

    seconds = _median_seconds(step, args.repeats)
    out["iql_updates_per_s"] = calls / seconds
    print(f"IQL: {calls / seconds:,.0f} updates/s (batch 256, 2x256 nets, {calls} per call)")
    path = results_path(THROUGHPUT, out["device"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


def plot(results: Path, iql_steps: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not results.exists():
        raise SystemExit(f"no results file {results}: run the benchmark first, or pass --results")
    rows = [
        r
        for r in json.loads(results.read_text())["results"]
        if r.get("iql_steps") == iql_steps and r["reward"] in ("true", "pt", "mr", "nmr")
    ]
    datasets = sorted({r["dataset"] for r in rows})
    if not datasets:
        raise SystemExit(f"no rows with --iql-steps {iql_steps} in {results}")
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4), squeeze=False)
    colours = {"pt": "tab:blue", "nmr": "tab:orange", "mr": "tab:green"}
    for ax, name in zip(axes[0], datasets):
        mine = [r for r in rows if r["dataset"] == name]
        x = 0
        ticks, labels = [], []
        for r in mine:
            if r["reward"] == "true":
                ax.axhline(r["score_mean"], color="black", ls="--", lw=1)
                ax.text(0, r["score_mean"], f"true, {r['seeds']} seeds", va="bottom", fontsize=8)
        for teacher in ("oracle", "mistake"):
            for reward in ("pt", "nmr", "mr"):
                row = next(
                    (r for r in mine if r["teacher"] == teacher and r["reward"] == reward), None
                )
                if row is None:
                    continue
                ax.bar(x, row["score_mean"], color=colours[reward], alpha=0.6)
                ax.plot([x] * len(row["scores"]), row["scores"], "k.", ms=6)
                ticks.append(x)
                labels.append(f"{teacher}\n{reward.upper()} ({row['ratio_to_true']:.2f}x)")
                x += 1
            x += 0.5
        ax.set_xticks(ticks, labels, fontsize=8)
        ax.set_title(f"{name}, IQL {iql_steps:,} steps")
        ax.set_ylabel("normalised score (dots: seeds)")
    fig.suptitle(
        "bars: mean over seeds; x: against the true reward over the same seeds", fontsize=9
    )
    fig.tight_layout()
    out = results.with_name(f"{results.stem}_{iql_steps // 1000}k.png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return out


def _median_seconds(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Hopper-v5", "Walker2d-v5"])
    parser.add_argument("--teachers", nargs="+", default=["oracle", "mistake"])
    parser.add_argument("--rewards", nargs="+", default=list(REWARDS), choices=REWARDS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--iql-steps", type=int, default=100_000)
    parser.add_argument("--eval-interval", type=int, default=25_000)
    parser.add_argument("--reward-epochs", type=int, default=30)
    parser.add_argument("--bc-steps", type=int, default=20_000, help="offline CPL's BC steps")
    parser.add_argument("--cpl-steps", type=int, default=1000, help="offline CPL's CPL steps")
    parser.add_argument(
        "--as-learned",
        action="store_true",
        help="give IQL learned rewards uncentred, as the reference relabels (default: centred)",
    )
    parser.add_argument("--runs-dir", default=str(ROOT / "runs/bench-offline"))
    parser.add_argument("--results", default=str(RESULTS), help="the JSON file rows merge into")
    add_grid_flags(parser)
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument(
        "--plot", action="store_true", help="draw the --iql-steps rows, run nothing"
    )
    parser.add_argument("--models", nargs="+", default=["mr", "nmr", "pt"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: expected a positive integer")
    if args.throughput:
        throughput(args)
    elif args.plot:
        plot(Path(args.results), args.iql_steps)
    else:
        benchmark(args)


if __name__ == "__main__":
    main()
