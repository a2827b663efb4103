"""QPA's parts (Hu et al., ICLR 2024): queries between what the policy does now (pairs from the
newest segments only) and hybrid replay (a share of every SAC minibatch from the newest
transitions)."""

from __future__ import annotations

import numpy as np
import pytest

from prefrl.data import ReplayBuffer, SegmentPool, Segments
from prefrl.data.segments import pair_keys


def _segments(first_id: int, n: int, h: int = 5) -> Segments:
    z = np.zeros(n, np.int64)
    return Segments(np.zeros((n, h, 2), np.float32), np.zeros((n, h, 1), np.float32),
                    np.zeros((n, h)), np.zeros((n, h, 1)), np.arange(first_id, first_id + n),
                    z, z, z)  # fmt: skip


@pytest.mark.parametrize("added", [60, 250])  # (the ring not yet full, and wrapped round)
def test_policy_aligned_pairs_come_from_the_newest_segments_only(added):
    pool = SegmentPool(100)
    for first in range(0, added, 7):
        pool.add(_segments(first, min(7, added - first)))
    rng = np.random.default_rng(0)
    left, right = pool.sample_pairs(rng, 200, newest=10)
    newest = set(range(added - 10, added))
    assert set(left.id) | set(right.id) <= newest and (left.id != right.id).all()
    assert len(set(left.id) | set(right.id)) == 10  # (all of them drawn)
    asked: set[tuple[int, int]] = set()
    left, right = pool.sample_pairs(rng, 60, asked, newest=10)
    assert len(left) == 45 == len(set(pair_keys(left.id, right.id)))  # every new pair, once
    assert set(left.id) | set(right.id) <= newest
    with pytest.raises(ValueError, match="among its newest 1"):
        pool.sample_pairs(rng, 1, newest=1)


def test_hybrid_batches_hold_their_share_of_recent_rows_in_every_minibatch():
    buffer = ReplayBuffer(300, 1, 1)
    for i in range(700):  # (wrapped round: the newest 50 are rewards 650..699)
        buffer.add(np.zeros(1), np.zeros(1), float(i), np.zeros(1), False)
    batch = buffer.sample(np.random.default_rng(0), 256, recent=50, recent_share=0.5)
    recent = batch.reward >= 650
    assert batch.reward.min() >= 400  # (only what the buffer holds)
    for block in recent.reshape(4, 64):  # every minibatch of 64 holds its 32 at least
        assert block.sum() >= 32
    assert recent.mean() < 0.75  # (the rest drawn from the whole buffer)
    same = ReplayBuffer.sample(buffer, np.random.default_rng(0), 256)
    again = buffer.sample(np.random.default_rng(0), 256, recent=50, recent_share=0.0)
    np.testing.assert_array_equal(same.reward, again.reward)  # (share 0: plain sampling)
