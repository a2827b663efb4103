"""Whether XLA:CPU's other convolution back ends, or another chunking of the gradient, make the
reward CNN's training step of Pong from preferences faster (its fits are about 40% of a Pong
preference run on a CPU, docs/performance.md).

    python benchmarks/frame_fit_settings.py --steps 8

Each setting is timed in a process of its own (XLA reads its flags once), on the pong preset's
step: 32 pairs of 25-step clips through the reward CNN (dropout 0.5) and back, on random frames.
The baseline is prefrl's setting (XLA's default flags, one pair per compiled call:
`prefrl.xla.SummedGrads`), timed in the same run. The settings:

- oneDNN: `--xla_cpu_use_onednn`, XLA's oneDNN back end (on CPUs with AMX it may run
  convolutions on its tiles);
- oneDNN custom calls: `--xla_cpu_experimental_onednn_custom_call`;
- XNNPACK: `--xla_cpu_use_xnnpack`;
- 2, 8 and all 32 pairs per compiled call, default flags.

Rows go to benchmarks/results/pixels.json ("fit_settings").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from device_results import put_rows

RESULTS = Path(__file__).parent / "results" / "pixels.json"
SETTINGS = {  # name -> (XLA_FLAGS, pairs per compiled call; None: all in one)
    "prefrl (default flags, 1 pair a call)": ("", 1),
    "oneDNN": ("--xla_cpu_use_onednn=true", 1),
    "oneDNN custom calls": ("--xla_cpu_experimental_onednn_custom_call=true", 1),
    "XNNPACK": ("--xla_cpu_use_xnnpack=true", 1),
    "2 pairs a call": ("", 2),
    "8 pairs a call": ("", 8),
    "32 pairs in one call": ("", None),
}

CHILD = """
import json, sys, time
import jax, numpy as np
from prefrl.presets import FRAME_PRESETS
from prefrl.reward.frames import FrameRewardModel
from prefrl.xla import SummedGrads

chunk, steps = json.loads(sys.argv[1]), int(sys.argv[2])
config = FRAME_PRESETS["pong"].config
model = FrameRewardModel(config.reward, seed=0)
model._grads = SummedGrads(model._loss, chunk)
rng = np.random.default_rng(0)
n, h = config.reward.batch_size, config.segment_length
left, right = (rng.integers(0, 256, (n, h + 3, 84, 84), dtype=np.uint8) for _ in range(2))
actions = np.zeros((n, h), np.int32)
target = rng.integers(0, 2, n).astype(np.float32)
key = jax.random.key(0)
seconds = []
for i in range(steps + 2):  # (the first two compile)
    start = time.perf_counter()
    jax.block_until_ready(model.train_step(left, right, actions, actions, target, key))
    seconds.append(time.perf_counter() - start)
print(json.dumps(seconds[2:]))
"""


def time_setting(flags: str, chunk: int | None, steps: int) -> list[float]:
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(chunk), str(steps)], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps a setting")
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: a positive number")
    load = os.getloadavg()[0]  # (the machine's load when it began: the times scale with it)
    rows, baseline = [], None
    for name, (flags, chunk) in SETTINGS.items():
        seconds = sorted(time_setting(flags, chunk, args.steps))
        median = seconds[len(seconds) // 2]
        baseline = baseline or median  # (the first setting is prefrl's)
        rows.append({"setting": name, "xla_flags": flags, "pairs_per_call": chunk,
                     "median_s_per_step": round(median, 4), "min_s_per_step": round(seconds[0], 4),
                     "x_prefrl": round(baseline / median, 3)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    if not args.no_write:
        put_rows(RESULTS, "fit_settings", rows, fit_settings_load=round(load, 2))
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
