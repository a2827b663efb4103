import numpy as np
import pytest

from prefrl.data import ReplayBuffer


def _fill(buf, n, start=0):
    for i in range(start, start + n):
        buf.add(np.full(3, i), np.full(2, -i), float(i), np.full(3, i + 1), i % 7 == 0)


def test_ring_buffer_overwrites_oldest_first():
    buf = ReplayBuffer(5, obs_dim=3, action_dim=2)
    _fill(buf, 7)
    assert len(buf) == 5 and buf.ptr == 2
    assert sorted(buf.reward.tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_add_batch_matches_add():
    a, b = ReplayBuffer(6, 3, 2), ReplayBuffer(6, 3, 2)
    _fill(a, 9)
    idx = np.arange(9)
    b.add_batch(
        np.repeat(idx[:, None], 3, 1),
        -np.repeat(idx[:, None], 2, 1),
        idx.astype(float),
        np.repeat(idx[:, None] + 1, 3, 1),
        idx % 7 == 0,
    )
    for name in ReplayBuffer.FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert (a.ptr, a.size) == (b.ptr, b.size)


def test_sample_shapes_and_only_filled_rows():
    buf = ReplayBuffer(100, 3, 2)
    _fill(buf, 10)
    batch = buf.sample(np.random.default_rng(0), 64)
    assert batch.obs.shape == (64, 3) and batch.action.shape == (64, 2)
    assert batch.reward.shape == (64,) and batch.terminated.shape == (64,)
    assert batch.reward.max() < 10  # never the empty tail
    np.testing.assert_array_equal(batch.next_obs, batch.obs + 1)


def test_sample_from_empty_buffer_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4, 3, 2).sample(np.random.default_rng(0), 2)


def test_a_half_and_half_batch_mixes_both_buffers_in_every_minibatch():
    """SAC with utd_ratio U cuts a batch into U consecutive minibatches: each must hold both
    buffers alike. (An online block then an offline one gave the first critic step online rows
    alone and the actor, which takes the last minibatch, offline rows alone.)"""
    online, offline = ReplayBuffer(100, 2, 1), ReplayBuffer(100, 2, 1)
    for _ in range(50):
        online.add(np.zeros(2), np.zeros(1), 0.0, np.zeros(2), False)
        offline.add(np.ones(2), np.zeros(1), 1.0, np.ones(2), False)
    rng = np.random.default_rng(0)
    batch = online.sample_beside(offline, rng, 4 * 16)
    np.testing.assert_array_equal(batch.reward.reshape(4, 16).mean(1), 0.5)
    np.testing.assert_array_equal(batch.obs[:, 0], batch.reward)  # rows kept whole
    assert online.sample_beside(offline, rng, 7).reward.sum() == 3  # this buffer gives the odd one


def test_relabel_rewrites_every_reward_in_place_with_fixed_chunk_shapes():
    buf = ReplayBuffer(50, 3, 2)
    _fill(buf, 23)
    seen_shapes = set()

    def reward_fn(obs, action, next_obs):
        seen_shapes.add((obs.shape, action.shape, next_obs.shape))
        return obs.sum(-1) + 10 * action[:, 0]

    reward_array = buf.reward
    buf.relabel(reward_fn, chunk_size=8)
    assert buf.reward is reward_array  # in place
    i = np.arange(23)
    np.testing.assert_allclose(buf.reward[:23], 3 * i - 10 * i)
    assert seen_shapes == {((8, 3), (8, 2), (8, 3))}  # padded last chunk: one compile


def test_relabel_rejects_a_wrong_number_of_rewards():
    buf = ReplayBuffer(10, 3, 2)
    _fill(buf, 4)
    with pytest.raises(ValueError, match="returned 1 rewards"):
        buf.relabel(lambda o, a, n: np.zeros(1), chunk_size=4)


def test_save_and_load_round_trip(tmp_path):
    buf = ReplayBuffer(8, 3, 2)
    _fill(buf, 11)
    buf.save(tmp_path / "buffer.npz")
    loaded = ReplayBuffer.load(tmp_path / "buffer.npz")
    assert (loaded.capacity, loaded.ptr, loaded.size) == (8, buf.ptr, 8)
    for name in ReplayBuffer.FIELDS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(buf, name))
    assert not list(tmp_path.glob("*.tmp"))
