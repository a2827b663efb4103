"""What a pixel run's labelled clips cost on disk and in time: random-policy Pong clips of 25
steps (28 stored frames each), labelled in pairs, written as a checkpoint writes them
(`PreferenceData.save`: deflated frames) and as plain .npz (`np.savez`, what prefrl wrote before
2026-12-01: the baseline), with fsync, then read back; the two take turns, round by round.

    python benchmarks/clip_storage.py --pairs 500 --rounds 3

A Pong run from preferences holds its labelled pairs in every checkpoint it keeps (3) and their
clips once more in its store, so the bytes per pair times about 4 is what a run's folder grows by
with each label. Rows go to benchmarks/results/pixels.json ("clip_storage").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from device_results import put_rows
from pixel_reward_accuracy import random_clips, synthetic_labels

from prefrl.data.segments import PreferenceData
from prefrl.rundir.atomic import atomic_write

RESULTS = Path(__file__).parent / "results" / "pixels.json"


def write_plain(data: PreferenceData, path: Path) -> None:
    with atomic_write(path, "wb") as f:
        np.savez(f, **data.arrays())


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="atari:Pong")
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    args = parser.parse_args()
    for flag, value in (("--pairs", args.pairs), ("--rounds", args.rounds)):
        if value < 1:
            parser.error(f"{flag} {value}: a positive number")

    load = os.getloadavg()[0]  # (the machine's load when it began: the times scale with it)
    clips = random_clips(args.env, 2 * args.pairs, 25)
    left, right = clips[: args.pairs], clips[args.pairs :]
    data = PreferenceData()
    data.add(left, right, synthetic_labels(left, right))
    ways = {"deflated": lambda p: data.save(p), "plain": lambda p: write_plain(data, p)}
    seconds: dict[str, dict[str, list[float]]] = {w: {"write": [], "read": []} for w in ways}
    size = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for way, write in ways.items():
                path = Path(tmp) / f"{way}.npz"
                seconds[way]["write"].append(timed(write, path))
                seconds[way]["read"].append(timed(PreferenceData.load, path))
                size[way] = path.stat().st_size
        back = PreferenceData.load(Path(tmp) / "deflated.npz").arrays()
        assert all(np.array_equal(back[k], v) for k, v in data.arrays().items())

    raw = sum(v.nbytes for v in data.arrays().values())
    rows = []
    for way in ways:
        write_s, read_s = (float(np.median(seconds[way][k])) for k in ("write", "read"))
        rows.append({
            "env": args.env, "way": way, "pairs": args.pairs, "bytes": size[way],
            "mb_per_pair": size[way] / args.pairs / 1e6, "write_s": write_s, "read_s": read_s,
            "raw_bytes": raw, "write_s_per_raw_gb": write_s / (raw / 1e9), "rounds": args.rounds,
            "load_average": load, "cores": os.cpu_count(),
        })  # fmt: skip
    rows[0]["size_ratio"] = size["plain"] / size["deflated"]
    for row in rows:
        print(f"{row['way']:>9}: {row['mb_per_pair']:.3f} MB a pair, write {row['write_s']:.2f} s, "
              f"read {row['read_s']:.2f} s ({args.pairs} pairs)")  # fmt: skip
    print(f"deflated: {rows[0]['size_ratio']:.0f}x smaller")
    if not args.no_write:
        put_rows(RESULTS, "clip_storage", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
