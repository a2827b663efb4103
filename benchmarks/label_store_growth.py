"""The cost of taking in one new labelled pair of Atari clips before each reward fit, with the
newest N kept, as a run from preferences on frames does it: prefrl's `PreferenceData` (rows kept
with room to grow) against concatenating every pair again (what it did before), side by side.

    python benchmarks/label_store_growth.py --labels 1000 --adds 200

Prints the median seconds per add + keep-newest + read, for each.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from random_clips import random_clips

from prefrl.data.segments import Label, PreferenceData, Segments

H = 25


class Concatenated:
    """The baseline: every pair concatenated again whenever one was added, the oldest dropped
    with a copy."""

    def __init__(self):
        self.obs_left = self.obs_right = None

    def add(self, left: Segments, right: Segments) -> None:
        if self.obs_left is None:
            self.obs_left, self.obs_right = left.obs, right.obs
        else:
            self.obs_left = np.concatenate([self.obs_left, left.obs])
            self.obs_right = np.concatenate([self.obs_right, right.obs])

    def keep_newest(self, n: int) -> None:
        if len(self.obs_left) > n:
            self.obs_left, self.obs_right = self.obs_left[-n:].copy(), self.obs_right[-n:].copy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=1000, help="newest pairs kept")
    parser.add_argument("--adds", type=int, default=200)
    args = parser.parse_args()
    if args.labels < 1 or args.adds < 1:
        parser.error(f"--labels {args.labels} and --adds {args.adds}: expected at least 1 each")
    rng = np.random.default_rng(0)
    first, one = random_clips(rng, args.labels, H), random_clips(rng, 1, H)
    ours, theirs = PreferenceData(), Concatenated()
    ours.add(first, first, [Label.LEFT] * args.labels)
    theirs.add(first, first)
    times = {"prefrl": [], "concatenated": []}
    for _ in range(args.adds):  # (alternated, so load on the machine falls on both alike)
        t0 = time.perf_counter()
        ours.add(one, one, [Label.RIGHT])
        ours.keep_newest(args.labels)
        ours.arrays()
        times["prefrl"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        theirs.add(one, one)
        theirs.keep_newest(args.labels)
        times["concatenated"].append(time.perf_counter() - t0)
    gb = 2 * first.obs.nbytes / 1e9
    out = {k: float(np.median(v)) for k, v in times.items()}
    out |= {"prefrl_mean": float(np.mean(times["prefrl"])),
            "concatenated_mean": float(np.mean(times["concatenated"])),
            "labels": args.labels, "frames_gb": gb, "prefrl_held_gb": ours.nbytes / 1e9}  # fmt: skip
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
