"""Reward-model fit cost per comparison per epoch: prefrl against imitation 1.0.1.

Both fit the same 1000 labelled pairs of 50-step HalfCheetah-v5 segments (random-policy rollouts,
Oracle labels), on one thread, with the same network (imitation's default BasicRewardNet: one MLP
32-32; batch 32, lr 1e-3). prefrl's default 3-member 3x256 ensemble is timed too (its own
batch 128), single-threaded and with both cores.

imitation pins gymnasium 0.29 and stable-baselines3 2.2.1, so it runs in its own environment:

    python3 -m venv .venv-imitation
    .venv-imitation/bin/pip install torch==2.13.0 imitation==1.0.1 "gymnasium[mujoco]==0.29.1"
    .venv/bin/python benchmarks/reward_fit_cost.py

Writes benchmarks/results/reward_fit_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def collect(path: Path, pairs: int, length: int, seed: int) -> None:
    """Random-policy HalfCheetah-v5 segments, labelled by the Oracle teacher."""
    from prefrl.data import Segments
    from prefrl.envs import make_env
    from prefrl.feedback import TEACHER_PRESETS, scripted_labels

    env = make_env("HalfCheetah-v5", seed=seed)
    rng = np.random.default_rng(seed)
    n = 2 * pairs
    obs = np.zeros((n, length, env.obs_dim), np.float32)
    act = rng.uniform(-1, 1, (n, length, env.action_dim)).astype(np.float32)
    rew = np.zeros((n, length), np.float32)
    last = np.zeros((n, env.obs_dim), np.float32)
    o, _ = env.reset(seed=seed)
    for i in range(n):
        for t in range(length):
            obs[i, t] = o
            o, r, term, trunc, _ = env.step(act[i, t])
            rew[i, t] = r
            if term or trunc:
                o, _ = env.reset()
        last[i] = o
    z = np.zeros(n, np.int64)
    segs = Segments(obs, act, rew, np.zeros((n, length, 1)), np.arange(n), z, z, z)
    left, right = segs[np.arange(pairs)], segs[np.arange(pairs, n)]
    labels = scripted_labels(TEACHER_PRESETS["oracle"], left, right, rng, 1.0)
    np.savez(path, obs=obs, act=act, rew=rew, last=last, labels=labels)


def time_prefrl(path: Path, epochs: int, config: str) -> float:
    from prefrl.data import PreferenceData, Segments
    from prefrl.reward import MLPRewardEnsemble, RewardConfig

    d = np.load(path)
    n, length = d["obs"].shape[:2]
    pairs = n // 2
    z = np.zeros(n, np.int64)
    segs = Segments(d["obs"], d["act"], d["rew"], np.zeros((n, length, 1)), np.arange(n), z, z, z)
    data = PreferenceData()
    data.add(segs[np.arange(pairs)], segs[np.arange(pairs, n)], d["labels"])
    common = {"max_epochs": epochs, "min_steps": 0, "stop_accuracy": 1.01, "val_fraction": 0.0}
    if config == "same-as-imitation":
        cfg = RewardConfig(
            members=1, hidden_dims=(32, 32), output="linear", batch_size=32, lr=1e-3,
            bootstrap=False, **common,
        )  # fmt: skip
    else:
        cfg = RewardConfig(**common)
    model = MLPRewardEnsemble(cfg, d["obs"].shape[-1], d["act"].shape[-1])
    model.fit(data)  # compile
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        m = model.fit(data)
        best = min(best, time.perf_counter() - t0)
    assert m["reward/epochs"] == epochs
    return 1000 * best / (epochs * pairs)


def time_imitation(path: Path, epochs: int) -> float:
    import gymnasium as gym
    import torch
    from imitation.algorithms import preference_comparisons as pc
    from imitation.data.types import TrajectoryWithRew
    from imitation.rewards.reward_nets import BasicRewardNet

    torch.set_num_threads(1)
    d = np.load(path)
    n, _, obs_dim = d["obs"].shape
    act_dim = d["act"].shape[-1]
    pairs = n // 2
    frags = [
        TrajectoryWithRew(
            obs=np.concatenate([d["obs"][i], d["last"][i][None]]),
            acts=d["act"][i],
            infos=None,
            terminal=False,
            rews=d["rew"][i],
        )
        for i in range(n)
    ]
    # imitation's preference is P(fragment 1 ≻ fragment 2); prefrl's labels: 0 left, 1 right.
    prefs = np.where(d["labels"] == 0, 1.0, np.where(d["labels"] == 1, 0.0, 0.5)).astype(np.float32)
    dataset = pc.PreferenceDataset()
    dataset.push(list(zip(frags[:pairs], frags[pairs:], strict=True)), prefs)
    obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    act_space = gym.spaces.Box(-1, 1, (act_dim,), np.float32)
    net = BasicRewardNet(obs_space, act_space)
    trainer = pc.BasicRewardTrainer(
        pc.PreferenceModel(net), pc.CrossEntropyRewardLoss(), rng=np.random.default_rng(0),
        batch_size=32, epochs=1, lr=1e-3,
    )  # fmt: skip
    trainer.train(dataset, epoch_multiplier=1.0)  # warm-up
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        trainer.train(dataset, epoch_multiplier=float(epochs))
        best = min(best, time.perf_counter() - t0)
    return 1000 * best / (epochs * pairs)


def _worker(args: list[str], python: str, extra_env: dict[str, str]) -> float:
    env = {**os.environ, **extra_env}
    out = subprocess.run(
        [python, __file__, "--worker", *args], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--imitation-python", default=str(ROOT / ".venv-imitation/bin/python"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/reward_fit_cost.json"))
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, path, epochs, *rest = args.worker
        if kind == "imitation":
            print(time_imitation(Path(path), int(epochs)))
        else:
            print(time_prefrl(Path(path), int(epochs), rest[0]))
        return

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "pairs.npz"
        collect(data, args.pairs, args.length, seed=0)
        single = {"XLA_FLAGS": SINGLE_THREAD_XLA}
        ep = str(args.epochs)
        rows = {
            "imitation (BasicRewardNet 32-32, 1 thread)": _worker(
                ["imitation", str(data), ep], args.imitation_python, {}
            ),
            "prefrl (same net, 1 thread)": _worker(
                ["prefrl", str(data), ep, "same-as-imitation"], sys.executable, single
            ),
            "prefrl default (3 x 3x256 ensemble, 1 thread)": _worker(
                ["prefrl", str(data), ep, "default"], sys.executable, single
            ),
            "prefrl default (3 x 3x256 ensemble, 2 cores)": _worker(
                ["prefrl", str(data), ep, "default"], sys.executable, {}
            ),
        }
    imitation = rows["imitation (BasicRewardNet 32-32, 1 thread)"]
    print(f"{'setting':<48} {'ms/comparison-epoch':>20} {'imitation / this':>17}")
    for name, ms in rows.items():
        print(f"{name:<48} {ms:>20.4f} {imitation / ms:>16.1f}x")
    ours = rows["prefrl (same net, 1 thread)"]
    command = "python benchmarks/reward_fit_cost.py " + " ".join(sys.argv[1:])
    result = {
        "command": command.strip(),
        "pairs": args.pairs,
        "segment_length": args.length,
        "epochs_timed": args.epochs,
        "prefrl_ms_per_comparison_epoch": ours,
        "imitation_ms_per_comparison_epoch": imitation,
        "ratio": imitation / ours,
        "all_settings_ms_per_comparison_epoch": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
