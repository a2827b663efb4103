"""Ratings of single clips (1-100) and the pairwise labels they imply.

A person (the web app's rating page, or the terminal) or a scripted rater scores each segment
from 1 to 100; every pair of rated segments then becomes a label: the higher-rated one is
preferred, equal ratings give an equal label (n (n - 1) / 2 pairs from n segments). This is how
a handful of ratings yields hundreds of pairs for CPL fine-tuning (the RoboPianist workflow).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from prefrl.data.segments import Label


def parse_rating(value) -> int:
    try:
        number = float("nan") if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (math.isfinite(number) and number.is_integer() and 1 <= number <= 100):
        raise ValueError(f"rating {value!r} is invalid: expected a whole number from 1 to 100")
    return int(number)


def per_rater(counts: dict[str, int]) -> str:
    """Ratings per rater, as people read them: "local 10, scripted:low-action 12"."""
    return ", ".join(f"{who} {n}" for who, n in sorted(counts.items())) or "none"


class RatedPairs(NamedTuple):
    left: np.ndarray  # (P,) segment ids
    right: np.ndarray  # (P,) segment ids
    labels: np.ndarray  # (P,) int8 Label values


def ratings_to_pairs(segment_ids, ratings, families=None) -> RatedPairs:
    """Every pair of rated segments as a label. A segment rated more than once (several people)
    counts with its mean rating, so each pair appears once.

    `families` (one key per rating, e.g. the branch point of `prefrl collect --siblings`):
    only pairs of segments of the same family, which differ by their actions and not by where
    they started. A segment whose family is None is in no pair."""
    ids = np.asarray(segment_ids, np.int64).reshape(-1)
    values = np.asarray([parse_rating(r) for r in np.asarray(ratings).reshape(-1).tolist()])
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} segments and {len(values)} ratings: expected one each")
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    mean = np.bincount(inverse, weights=values) / np.bincount(inverse)
    if len(np.unique(mean)) < 2:
        raise ValueError(
            f"the {len(unique)} rated segment(s) all have the same rating ({mean[0]:g}): at "
            "least two different ratings are needed to make a preference"
        )
    i, j = np.triu_indices(len(unique), k=1)
    if families is not None:
        keys = np.asarray([None if f is None else str(f) for f in families], object)
        if len(keys) != len(ids):
            raise ValueError(f"{len(ids)} ratings and {len(keys)} families: expected one each")
        family = keys[first]
        known = np.asarray([f is not None for f in family], bool)
        same = known[i] & (family[i] == family[j])
        if not same.any():
            raise ValueError(
                "no two rated segments are of the same family: pairs within families need "
                "segments collected with siblings (prefrl collect --siblings N)"
            )
        i, j = i[same], j[same]
    labels = np.where(
        mean[i] > mean[j], Label.LEFT, np.where(mean[i] < mean[j], Label.RIGHT, Label.EQUAL)
    ).astype(np.int8)
    return RatedPairs(unique[i], unique[j], labels)


def scripted_ratings(values, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """A scripted rater: each segment's score (its true return, or any per-segment metric;
    higher is better) mapped linearly onto 1-100 over the rated set, plus Gaussian noise with
    std `noise` x 99, rounded and clipped."""
    values = np.asarray(values, np.float64).reshape(-1)
    if len(values) == 0 or not np.all(np.isfinite(values)):
        raise ValueError("scripted ratings need finite scores for one or more segments")
    if noise < 0:
        raise ValueError(f"rating noise={noise} is invalid: expected >= 0")
    low, high = values.min(), values.max()
    span = high - low if high > low else 1.0
    scores = 1.0 + 99.0 * (values - low) / span
    scores += np.random.default_rng([seed, 13]).normal(0.0, noise * 99.0, len(values))
    return np.clip(np.rint(scores), 1, 100).astype(np.int64)
