"""Random Atari-sized clips for the pixel benchmarks: what a run stores per clip (its steps'
frames and the 3 before), with nothing else in it."""

from __future__ import annotations

import numpy as np

from prefrl.data.segments import Segments


def random_clips(rng: np.random.Generator, n: int, steps: int, first_id: int = 0) -> Segments:
    """`n` clips of `steps` steps: (n, steps + 3, 84, 84) uint8 frames, zero actions and
    rewards, ids from `first_id`."""
    zeros = np.zeros(n, np.int64)
    return Segments(obs=rng.integers(0, 255, (n, steps + 3, 84, 84), np.uint8),
                    action=np.zeros((n, steps, 1), np.float32),
                    reward=np.zeros((n, steps), np.float32), state=np.zeros((n, 1, 1), np.uint8),
                    id=np.arange(n) + first_id, step=zeros, episode=zeros, start=zeros)  # fmt: skip
