"""How well the reward CNN learns Pong from random-policy labels: clips of 25 agent steps from
the random policy, 500 pairs labelled by the synthetic teacher (sign-clipped game rewards, as
the seed's), the seed's network (dropout 0.5) trained on them, then judged on 200 held-out pairs
of other clips: the share of the teacher's decided preferences it agrees with, and the
correlation of learned and true (clipped) clip returns over the held-out clips.

    python benchmarks/pixel_reward_accuracy.py --labels 500 --steps 600

Writes "reward_accuracy" into benchmarks/results/pixels.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from prefrl.data import Label
from prefrl.data.frame_clips import FrameClipRecorder
from prefrl.data.segments import PreferenceData, Segments
from prefrl.envs import make_pixel_env
from prefrl.envs.frames import FrameVectorEnv
from prefrl.reward.base import pearson
from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel

RESULTS = Path(__file__).parent / "results" / "pixels.json"


def random_clips(env_id: str, n: int, length: int, envs: int = 16, seed: int = 0) -> Segments:
    """`n` clips of the random policy, cut from `envs` envs side by side."""
    vec = FrameVectorEnv([make_pixel_env(env_id, seed=seed * 1000 + i) for i in range(envs)])
    recorder = FrameClipRecorder(envs, length)
    rng = np.random.default_rng(seed)
    clips: list[Segments] = []
    obs, step = vec.reset(), 0
    while len(clips) < n:
        starting = recorder.starting()
        states = {i: vec.envs[i].get_state() for i in np.flatnonzero(starting)}
        action = rng.integers(0, vec.envs[0].n_actions, envs)
        next_obs, reward, terminated, truncated, _ = vec.step(action)
        clips += recorder.record(step, obs, action, reward, terminated | truncated, states)
        obs, step = next_obs, step + envs
    vec.close()
    return Segments.concatenate(clips[:n])


def synthetic_labels(left: Segments, right: Segments) -> np.ndarray:
    """The seed's synthetic preference: the larger sum of sign-clipped rewards (ties: equal)."""
    a, b = np.sign(left.reward).sum(-1), np.sign(right.reward).sum(-1)
    return np.where(a > b, Label.LEFT, np.where(b > a, Label.RIGHT, Label.EQUAL)).astype(np.int64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="atari:Pong")
    parser.add_argument("--labels", type=int, default=500)
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--steps", type=int, default=600, help="reward-model gradient steps")
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
    t1 = time.perf_counter()
    for _ in range(-(-args.steps // 50)):
        fit = model.fit(train)
    fit_s = time.perf_counter() - t1
    hl, hr, hy = left[args.labels :], right[args.labels :], labels[args.labels :]
    rl = model.predict(hl.obs, None).sum(-1)
    rr = model.predict(hr.obs, None).sum(-1)
    decided = hy != Label.EQUAL
    agree = np.where(hy == Label.LEFT, rl > rr, rr > rl)[decided]
    both = Segments.concatenate([hl, hr])
    learned = model.predict(both.obs, None).sum(-1)
    row = {
        "env": args.env, "labels": args.labels, "train_labels_decided": int(
            (labels[: args.labels] != Label.EQUAL).sum()),
        "held_out_pairs": args.held_out, "held_out_decided": int(decided.sum()),
        "held_out_accuracy": float(agree.mean()) if decided.any() else None,
        "clip_return_corr": pearson(learned, np.sign(both.reward).sum(-1)),
        "train_accuracy": fit.get("reward/train_accuracy"),
        "val_accuracy_in_fit": fit.get("reward/val_accuracy"),
        "gradient_steps": -(-args.steps // 50) * 50, "fit_seconds": fit_s, "device": "cpu",
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    old["reward_accuracy"] = [row]
    old["reward_accuracy_command"] = "python benchmarks/pixel_reward_accuracy.py " + " ".join(
        sys.argv[1:]
    )
    RESULTS.write_text(json.dumps(old, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
