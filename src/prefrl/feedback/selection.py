"""Query selection: which pairs of segments to ask about.

Each method draws `oversample` x n random candidate pairs from the pool (none asked before, none
twice) and keeps the n it rates most informative (B-Pref): uniform keeps the first n;
disagreement the largest std across ensemble members of P(right ≻ left); entropy the largest mean
binary entropy of the members' P. policy-aligned (QPA, Hu et al. 2024) draws its n pairs
uniformly among the newest segments only: what the policy does now.
"""

from __future__ import annotations

import numpy as np

from prefrl.data.segments import SegmentPool, Segments
from prefrl.reward.base import RewardModel

SELECTION_METHODS = ("uniform", "disagreement", "entropy", "policy-aligned")


def check_method(method: str) -> None:
    if method not in SELECTION_METHODS:
        raise ValueError(
            f"query selection {method!r} is unknown; known: {', '.join(SELECTION_METHODS)}"
        )


def select_pairs(
    method: str,
    pool: SegmentPool,
    n: int,
    rng: np.random.Generator,
    model: RewardModel | None = None,
    oversample: int = 10,
    asked: set[tuple[int, int]] | None = None,
    newest: int | None = None,
) -> tuple[Segments, Segments]:
    """`n` pairs from the pool. Without a fitted model (the first queries) every method is
    uniform. With `asked` (`pair_keys` of the pairs asked before), each pair is new and asked
    once, in either order; fewer than `n` when the pool has fewer new pairs. `newest`: the
    newest segments policy-aligned queries draw from."""
    check_method(method)
    if method == "policy-aligned":
        return pool.sample_pairs(rng, n, asked, newest=newest)
    if method == "uniform" or model is None:
        return pool.sample_pairs(rng, n, asked)
    left, right = pool.sample_pairs(rng, n * max(1, oversample), asked)
    probs = model.pair_probs(left.obs, left.action, right.obs, right.action)  # (M, C)
    if method == "disagreement":
        score = probs.std(0)
    else:
        p = np.clip(probs, 1e-6, 1 - 1e-6)
        score = (-(p * np.log(p) + (1 - p) * np.log(1 - p))).mean(0)
    best = np.argsort(-score, kind="stable")[:n]
    return left[best], right[best]
