"""Where a fit of the frame reward model spends its time, at the Pong preset's shapes: 500
labelled pairs of 25-step clips, dropout 0.5, 20 gradient steps of 32 pairs a fit.

    python benchmarks/frame_reward_fit.py --reps 20

Prints (seconds, medians): the host-side indexing of a batch's clips, one gradient step from
host arrays and from arrays already on the device, reading the rewards of 80 stacks (one A2C
rollout), and a whole fit (its steps, the held-out accuracy and the output scaling). To compare
two versions of prefrl, run it with each one's `src` first on PYTHONPATH, alternated, in one
session of one machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np
from random_clips import random_clips

from prefrl.data.segments import Label, PreferenceData
from prefrl.reward.frames import FrameRewardConfig, FrameRewardModel

PAIRS, H, BATCH = 500, 25, 32


def median_seconds(fn, reps: int) -> float:
    fn()  # (compiles)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--fits", type=int, default=3)
    args = parser.parse_args()
    if args.reps < 1 or args.fits < 1:
        parser.error(f"--reps {args.reps} and --fits {args.fits}: expected at least 1 each")

    rng = np.random.default_rng(0)
    data = PreferenceData()
    data.add(random_clips(rng, PAIRS, H), random_clips(rng, PAIRS, H, first_id=10_000),
             rng.choice([Label.LEFT, Label.RIGHT], PAIRS))  # fmt: skip
    model = FrameRewardModel(FrameRewardConfig(dropout=0.5, steps_per_fit=20), seed=0)
    arrays = data.arrays()
    idx = np.sort(rng.choice(PAIRS, BATCH, replace=False))
    actions = np.zeros((BATCH, H), np.int32)
    target = rng.random(BATCH).astype(np.float32)
    key = jax.random.key(0)
    left, right = arrays["obs_left"][idx], arrays["obs_right"][idx]
    on_device = jax.device_put((left, right, actions, target))

    def step(lft, rgt, act, tgt):
        jax.block_until_ready(model.train_step(lft, rgt, act, act, tgt, key)[0])

    stacks = rng.integers(0, 255, (1, 80, 84, 84, 4), np.uint8)
    out = {
        "device": jax.devices()[0].device_kind,
        "host_index_s": median_seconds(
            lambda: (arrays["obs_left"][idx], arrays["obs_right"][idx]), args.reps),
        "step_from_host_s": median_seconds(lambda: step(left, right, actions, target), args.reps),
        "step_on_device_s": median_seconds(lambda: step(*on_device), args.reps),
        "read_80_stacks_s": median_seconds(lambda: model.predict(stacks, None), args.reps),
    }  # fmt: skip
    t0 = time.perf_counter()
    model.fit(data)
    out["first_fit_s"] = time.perf_counter() - t0
    fits = []
    for _ in range(args.fits):
        t0 = time.perf_counter()
        model.fit(data)
        fits.append(time.perf_counter() - t0)
    out["fit_s"] = float(np.median(fits))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
