"""Full-loop SAC throughput: prefrl vs Stable-Baselines3 vs SBX, same settings, same run.

Settings for every contestant: one gradient step per env step, batch 256, 2x256 networks, 2
critics, learned temperature. Each contestant runs in its own subprocess; the timed window starts
after warm-up (random actions, compilation) and covers `--steps` learning steps. The ceiling (the
jitted update alone) is measured twice: in its own process, and right after the loop in the
loop's process, where the round's ratio of the two shares that process's speed.

    python benchmarks/sac_throughput.py --envs HalfCheetah-v5 Hopper-v5 --steps 3000 --rounds 3

Needs the bench extra (`pip install -e .[bench]`) for the peers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from device_results import device_kind, results_path

RESULTS = Path(__file__).parent / "results" / "sac_throughput.json"
WARMUP = 1_000  # random-action steps before learning starts (not timed)
SKIP = 300  # learning steps run before the clock starts (compilation, caches)


def _peer_rate(algo_cls, env_id: str, steps: int) -> float:
    import gymnasium as gym
    from stable_baselines3.common.callbacks import BaseCallback

    marks: dict[str, float] = {}

    class Clock(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == WARMUP + SKIP:
                marks["start"] = time.perf_counter()
            return True

    model = algo_cls(
        "MlpPolicy",
        gym.make(env_id),
        batch_size=256,
        learning_starts=WARMUP,
        train_freq=1,
        gradient_steps=1,
        buffer_size=100_000,
        policy_kwargs={"net_arch": [256, 256]},
        seed=0,
        verbose=0,
    )
    model.learn(total_timesteps=WARMUP + SKIP + steps, callback=Clock())
    return steps / (time.perf_counter() - marks["start"])


def worker_sb3(env_id: str, steps: int) -> dict[str, float]:
    from stable_baselines3 import SAC

    return {"sb3": _peer_rate(SAC, env_id, steps)}


def worker_sbx(env_id: str, steps: int) -> dict[str, float]:
    from sbx import SAC

    return {"sbx": _peer_rate(SAC, env_id, steps)}


def worker_prefrl(env_id: str, steps: int) -> dict[str, float]:
    """The loop's rate, then the update alone in the same process: a ceiling measured seconds
    later under the same process's conditions, which a separate process does not share."""
    import tempfile

    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics

    log = 500
    with tempfile.TemporaryDirectory() as tmp:
        config = RLConfig(
            env=env_id,
            steps=WARMUP + SKIP + steps,
            warmstart_steps=WARMUP,
            eval_interval=10**9,
            eval_episodes=1,
            video=False,
            checkpoint_interval=10**9,
            log_interval=log,
            buffer_size=100_000,
            runs_dir=Path(tmp),
            name="bench",
            progress=False,
        )
        result = train_rl(config)
        rows = [r for r in read_metrics(result.run_dir) if "train/steps_per_s" in r]
    # Intervals that lie wholly inside the timed window.
    timed = [r["train/steps_per_s"] for r in rows if r["step"] - log >= WARMUP + SKIP]
    loop = len(timed) / sum(1.0 / r for r in timed)  # harmonic mean = total steps / total time
    return {"prefrl": loop, "ceiling_same_process": worker_ceiling(env_id, steps)["ceiling"]}


def worker_ceiling(env_id: str, steps: int) -> dict[str, float]:
    """Pure jitted-update rate: the same update on batches already in memory, no env."""
    import jax
    import numpy as np

    from prefrl.agents import SAC, SACConfig
    from prefrl.data import ReplayBuffer
    from prefrl.envs import make_env

    env = make_env(env_id)
    sac = SAC(SACConfig(), env.obs_dim, env.action_dim)
    state, key = sac.init(jax.random.PRNGKey(0)), jax.random.key(1, impl="rbg")  # as the loop
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(10_000, env.obs_dim, env.action_dim)
    n = 10_000
    buf.add_batch(
        rng.standard_normal((n, env.obs_dim)),
        rng.uniform(-1, 1, (n, env.action_dim)),
        rng.standard_normal(n),
        rng.standard_normal((n, env.obs_dim)),
        np.zeros(n),
    )
    batches = [buf.sample(rng, 256) for _ in range(64)]
    for b in batches[: SKIP // 10]:
        state, _ = sac.update(state, b, key)
    jax.block_until_ready(state)
    start = time.perf_counter()
    for i in range(steps):
        state, _ = sac.update(state, batches[i % 64], key)
    jax.block_until_ready(state)
    return {"ceiling": steps / (time.perf_counter() - start)}


WORKERS = {"prefrl": worker_prefrl, "sb3": worker_sb3, "sbx": worker_sbx, "ceiling": worker_ceiling}


def run_worker(name: str, env_id: str, steps: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", name, "--envs", env_id, "--steps", str(steps)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def ratio_interval(a: list[float], b: list[float], level: float = 0.9) -> tuple[float, float]:
    """Bootstrap interval of the median of the per-round ratios a/b (rounds resampled, seeded):
    how far the verdict could move with other rounds on this machine."""
    ratios = np.divide(a, b)
    picks = np.random.default_rng(0).integers(0, len(ratios), (2000, len(ratios)))
    medians = np.median(ratios[picks], axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Hopper-v5"])
    parser.add_argument("--steps", type=int, default=3000, help="timed learning steps per run")
    parser.add_argument("--peers", nargs="*", default=["sb3", "sbx"])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument(
        "--out",
        type=Path,
        help="results file (default: benchmarks/results/sac_throughput.json, or one named after "
        "the device on a GPU)",
    )
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1000:  # the loop's rate is read from its 500-step metric rows
        parser.error(f"--steps={args.steps} is too few: expected at least 1000")
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.envs[0], args.steps)))
        return

    command = "python benchmarks/sac_throughput.py " + " ".join(sys.argv[1:])
    results = []
    contestants = ["prefrl", *args.peers, "ceiling"]
    for env_id in args.envs:
        # The machine's speed drifts by up to ~20% over minutes, so contestants take turns
        # (round-robin) and each one's median over the rounds is reported.
        rates: dict[str, list[float]] = {}
        for round_ in range(args.rounds):
            for name in contestants:
                for label, rate in run_worker(name, env_id, args.steps).items():
                    rates.setdefault(label, []).append(rate)
                    print(
                        f"{env_id:16s} round {round_ + 1} {label:8s} {rate:8.1f} steps/s",
                        flush=True,
                    )
        row = {"env": env_id}
        row.update({name: round(float(np.median(r)), 1) for name, r in rates.items()})
        row["rounds"] = {name: [round(x, 1) for x in r] for name, r in rates.items()}
        # Each round's contestants ran minutes apart, so a round's ratios share its drift.
        row["paired_ratios"] = {
            name: round(float(np.median(np.divide(rates["prefrl"], rates[name]))), 3)
            for name in [*contestants[1:], "ceiling_same_process"]
        }
        row["paired_ratio_90pct_intervals"] = {
            name: [round(x, 3) for x in ratio_interval(rates["prefrl"], rates[name])]
            for name in [*contestants[1:], "ceiling_same_process"]
        }
        results.append(row)

    print(
        f"\n{'env':16s} {'prefrl':>8s} "
        + " ".join(f"{p:>8s}" for p in args.peers)
        + f" {'ceiling':>8s}  ratios"
    )
    for row in results:
        ratios = [f"{row['prefrl'] / row[p]:.2f}x {p}" for p in args.peers]
        ratios.append(f"{row['prefrl'] / row['ceiling']:.0%} of ceiling")
        print(
            f"{row['env']:16s} {row['prefrl']:8.1f} "
            + " ".join(f"{row[p]:8.1f}" for p in args.peers)
            + f" {row['ceiling']:8.1f}  "
            + ", ".join(ratios)
        )
        paired = row["paired_ratios"]
        parts = [f"{paired[p]:.2f}x {p}" for p in args.peers]
        parts.append(
            f"{paired['ceiling']:.0%} of ceiling"
            f" ({paired['ceiling_same_process']:.0%} of the same process's ceiling)"
        )
        print(f"{'':16s} median of the rounds' own ratios: " + ", ".join(parts))
        low_high = row["paired_ratio_90pct_intervals"]
        parts = [f"{low_high[p][0]:.2f}-{low_high[p][1]:.2f}x {p}" for p in args.peers]
        same = low_high["ceiling_same_process"]
        parts.append(
            f"{low_high['ceiling'][0]:.0%}-{low_high['ceiling'][1]:.0%} of ceiling"
            f" ({same[0]:.0%}-{same[1]:.0%} of the same process's)"
        )
        print(f"{'':16s} 90% bootstrap intervals over rounds: " + ", ".join(parts))
    kind = device_kind()
    path = args.out or results_path(RESULTS, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"command": command, "device": kind, "results": results}
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
