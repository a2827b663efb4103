"""Pong from preferences on the CPU: how fast the loop (A2C on the learned reward, new labels,
reward fits) runs with the reward CNN trained at two cadences, side by side in one run:

- `fit_every 8`: 20 gradient steps of 32 pairs every 8 A2C updates (640 agent steps): one
  labelled pair processed per agent step, what the pong preset did before;
- `fit_every 80`: the same fit every 6,400 agent steps, one pair per 10 agent steps, the rate
  of Christiano et al. 2017 (Appendix A.2: the predictor "typically processes 1 label per 10 RL
  timesteps").

    python benchmarks/pong_fit_cadence.py --rounds 1

Each run pre-trains briefly on a few random-policy labels (not timed), then trains A2C for
--fits fits of the slower cadence; the figure is agent steps per second from its first reward
fit to its last (A2C, labels, fits and all; the final evaluation left out). Rounds alternate the
cadences, so load on the machine falls on both alike. Rows go to benchmarks/results/pixels.json
("fit_cadence").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from device_results import put_rows

from prefrl.pixels.preferences import train_frames_from_preferences
from prefrl.presets import FRAME_PRESETS

RESULTS = Path(__file__).parent / "results" / "pixels.json"
PONG = FRAME_PRESETS["pong"].config
PER_UPDATE = PONG.a2c.n_envs * PONG.a2c.n_steps
"""Agent steps per A2C update (16 envs x 5 steps)."""
CADENCES = (8, PONG.fit_every)
"""The pong preset's old cadence and its own (the paper's)."""


def pairs_per_agent_step(fit_every: int) -> float:
    return PONG.reward.steps_per_fit * PONG.reward.batch_size / (fit_every * PER_UPDATE)


def steps_per_second(fit_every: int, fits: int, root: Path) -> tuple[float, int]:
    """Agent steps/s between a run's first and last reward fit, and the fits timed."""
    steps = fits * max(CADENCES) * PER_UPDATE  # (the same agent steps at either cadence)
    config = dataclasses.replace(
        PONG, steps=steps, fit_every=fit_every, labels=400,
        initial_labels=50, pretrain_steps=20, eval_interval=steps, eval_episodes=1,
        video=False, progress=False, runs_dir=root, name=f"every{fit_every}",
    )  # fmt: skip
    fits_at: list[tuple[float, int]] = []

    def timed(event):
        if event.kind == "fit" and event.step > 0:
            fits_at.append((time.perf_counter(), event.step))
        return True

    train_frames_from_preferences(config, callback=timed)
    (t0, s0), (t1, s1) = fits_at[0], fits_at[-1]
    return (s1 - s0) / (t1 - t0), len(fits_at)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fits", type=int, default=4,
                        help="fits of the slower cadence a run (each 6,400 agent steps)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rates: dict[int, list[float]] = {k: [] for k in CADENCES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for fit_every, measured in rates.items():
                rate, fits = steps_per_second(fit_every, args.fits, Path(tmp) / f"r{r}")
                measured.append(rate)
                print(f"round {r}: fit_every {fit_every}: {rate:.0f} agent steps/s "
                      f"({fits} fits timed)", flush=True)  # fmt: skip
    base, paper = (float(np.median(rates[k])) for k in CADENCES)
    rows = [
        {"env": "atari:Pong", "fit_every": k, "pairs_per_agent_step": pairs_per_agent_step(k),
         "agent_steps_per_s": float(np.median(v)), "rounds": v, "device": "cpu"}
        for k, v in rates.items()
    ]  # fmt: skip
    rows[1]["speedup"] = paper / base
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    put_rows(args.out, "fit_cadence", rows, fit_cadence_machine=machine)
    print(f"fit_every {CADENCES[1]} (the paper's rate): {paper / base:.1f}x the agent steps/s "
          f"of fit_every {CADENCES[0]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
