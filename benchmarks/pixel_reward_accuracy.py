"""How well the reward CNN learns Pong from random-policy labels: clips of 25 agent steps from
the random policy, 500 pairs labelled by the synthetic teacher (sign-clipped game rewards, as
the seed's), the seed's network (dropout 0.5) trained on them, then judged on 200 held-out pairs
of other clips: the share of the teacher's decided preferences it agrees with, and the
correlation of learned and true (clipped) clip returns over the held-out clips.

    python benchmarks/pixel_reward_accuracy.py --labels 500 --steps 3000

The held-out pairs are judged every --eval-every gradient steps (the "curve" in the row).

Writes "reward_accuracy" into benchmarks/results/pixels.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from device_results import put_rows

from prefrl.data import Label
from prefrl.data.frame_clips import FrameClipRecorder
from prefrl.data.segments import PreferenceData, Segments
from prefrl.envs import make_pixel_env
from prefrl.envs.frames import FrameVectorEnv
from prefrl.envs.pool import seeded
from prefrl.reward.base import pearson
from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel

RESULTS = Path(__file__).parent / "results" / "pixels.json"


def random_clips(env_id: str, n: int, length: int, envs: int = 16, seed: int = 0) -> Segments:
    """`n` clips of the random policy, cut from `envs` envs side by side."""
    vec = FrameVectorEnv(seeded(make_pixel_env, env_id, seed * 1000), envs)
    recorder = FrameClipRecorder(envs, length)
    rng = np.random.default_rng(seed)
    clips: list[Segments] = []
    obs, step = vec.reset(), 0
    while len(clips) < n:
        starting = recorder.starting()
        states = vec.get_states(np.flatnonzero(starting))
        action = rng.integers(0, vec.n_actions, envs)
        next_obs, reward, terminated, truncated, _ = vec.step(action)
        clips += recorder.record(step, obs, action, reward, terminated | truncated, states)
        obs, step = next_obs, step + envs
    vec.close()
    return Segments.concatenate(clips[:n])


def synthetic_labels(left: Segments, right: Segments) -> np.ndarray:
    """The seed's synthetic preference: the larger sum of sign-clipped rewards (ties: equal)."""
    a, b = np.sign(left.reward).sum(-1), np.sign(right.reward).sum(-1)
    return np.where(a > b, Label.LEFT, np.where(b > a, Label.RIGHT, Label.EQUAL)).astype(np.int64)


def held_out(model: FrameRewardModel, left: Segments, right: Segments, y: np.ndarray) -> dict:
    """The share of the teacher's decided held-out preferences the model agrees with, and the
    correlation of learned and true (sign-clipped) clip returns over the held-out clips."""
    rl, rr = model.predict(left.obs, None).sum(-1), model.predict(right.obs, None).sum(-1)
    decided = y != Label.EQUAL
    agree = np.where(y == Label.LEFT, rl > rr, rr > rl)[decided]
    true = np.concatenate([np.sign(left.reward).sum(-1), np.sign(right.reward).sum(-1)])
    return {
        "held_out_decided": int(decided.sum()),
        "held_out_accuracy": float(agree.mean()) if decided.any() else None,
        "clip_return_corr": pearson(np.concatenate([rl, rr]), true),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="atari:Pong")
    parser.add_argument("--labels", type=int, default=500)
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--steps", type=int, default=600, help="reward-model gradient steps")
    parser.add_argument("--eval-every", type=int, default=500,
                        help="judge the held-out pairs every this many gradient steps")  # fmt: skip
    parser.add_argument("--length", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    n_pairs = args.labels + args.held_out
    clips = random_clips(args.env, 2 * n_pairs, args.length, seed=args.seed)
    left, right = clips[:n_pairs], clips[n_pairs:]
    labels = synthetic_labels(left, right)
    train = PreferenceData()
    train.add(left[: args.labels], right[: args.labels], labels[: args.labels])
    print(f"{2 * n_pairs} clips in {time.perf_counter() - t0:.0f} s; training ...", flush=True)
    model = FrameRewardModel(FrameRewardConfig(dropout=0.5, steps_per_fit=50), seed=args.seed)
    held = (left[args.labels :], right[args.labels :], labels[args.labels :])
    curve, fit_s = [], 0.0
    for fits in range(1, -(-args.steps // 50) + 1):
        t1 = time.perf_counter()
        fit = model.fit(train)
        fit_s += time.perf_counter() - t1
        if (fits * 50) % args.eval_every == 0 or fits * 50 >= args.steps:
            curve.append({"step": fits * 50, **held_out(model, *held)})
            print(json.dumps(curve[-1]), flush=True)
    row = {
        "env": args.env, "labels": args.labels, "train_labels_decided": int(
            (labels[: args.labels] != Label.EQUAL).sum()),
        "held_out_pairs": args.held_out, **curve[-1],
        "train_accuracy": fit.get("reward/train_accuracy"),
        "val_accuracy_in_fit": fit.get("reward/val_accuracy"),
        "gradient_steps": curve[-1]["step"], "fit_seconds": fit_s, "curve": curve,
        "device": "cpu",
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    put_rows(RESULTS, "reward_accuracy", [row])
    return 0


if __name__ == "__main__":
    sys.exit(main())
