"""Numpy ring buffer of transitions with in-place reward relabelling."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from prefrl.data.batch import Batch
from prefrl.rundir.atomic import atomic_write

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class ReplayBuffer:
    """Fixed-capacity FIFO of (obs, action, reward, next_obs, terminated).

    `terminated` marks true terminal states only (no bootstrap); time-limit truncations are not
    terminal, so they are not stored as such.
    """

    FIELDS = ("obs", "action", "reward", "next_obs", "terminated")

    def __init__(self, capacity: int, obs_dim: int, action_dim: int):
        if capacity <= 0:
            raise ValueError(f"capacity={capacity} is invalid: expected a positive integer")
        self.capacity = int(capacity)
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.reward = np.zeros((capacity,), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.terminated = np.zeros((capacity,), np.float32)
        self.ptr = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, obs, action, reward: float, next_obs, terminated: bool) -> None:
        i = self.ptr
        self.obs[i] = obs
        self.action[i] = action
        self.reward[i] = reward
        self.next_obs[i] = next_obs
        self.terminated[i] = terminated
        self.ptr = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_batch(self, obs, action, reward, next_obs, terminated) -> None:
        n = len(obs)
        idx = (self.ptr + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.action[idx] = action
        self.reward[idx] = reward
        self.next_obs[idx] = next_obs
        self.terminated[idx] = terminated
        self.ptr = int((self.ptr + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, rng: np.random.Generator, batch_size: int, recent: int | None = None,
               recent_share: float = 0.0) -> Batch:  # fmt: skip
        """`batch_size` rows drawn uniformly. With `recent` and `recent_share` (QPA's hybrid
        replay), that share of them comes from the newest `recent` transitions instead, spread
        evenly through the batch, so every run of consecutive rows (SAC's minibatches with
        `utd_ratio` > 1) holds its share of them."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if recent is None or recent_share == 0:
            idx = rng.integers(0, self.size, batch_size)
        else:
            k = round(recent_share * batch_size)
            newest = (self.ptr - 1 - rng.integers(0, min(recent, self.size), k)) % self.capacity
            spread = np.zeros(batch_size, bool)
            spread[(np.arange(k) * batch_size) // max(k, 1)] = True
            idx = np.empty(batch_size, np.int64)
            idx[spread], idx[~spread] = newest, rng.integers(0, self.size, batch_size - k)
        return Batch(
            self.obs[idx],
            self.action[idx],
            self.reward[idx],
            self.next_obs[idx],
            self.terminated[idx],
        )

    def sample_beside(self, other: ReplayBuffer | None, rng: np.random.Generator,
                      batch_size: int) -> Batch:  # fmt: skip
        """A batch half from this buffer, half from `other` (RLPD's symmetric sampling; this
        buffer gives the odd one); all from this one when `other` is None or empty.

        The two halves alternate row by row, so that any run of consecutive rows holds both
        alike: SAC with `utd_ratio` > 1 cuts the batch into consecutive minibatches, and a
        batch of two blocks would give some of them one buffer's rows alone."""
        if other is None or len(other) == 0:
            return self.sample(rng, batch_size)
        half = batch_size // 2
        a, b = self.sample(rng, batch_size - half), other.sample(rng, half)
        return Batch(*(_alternate(x, y) for x, y in zip(a, b, strict=True)))

    def relabel(self, reward_fn: RewardFn, chunk_size: int = 8192) -> None:
        """Overwrite every stored reward with `reward_fn(obs, action, next_obs)`, in place.

        The function sees chunks of exactly `chunk_size` rows (the last one zero-padded), so a
        jitted reward model compiles once.
        """
        for start in range(0, self.size, chunk_size):
            stop = min(start + chunk_size, self.size)
            n = stop - start
            obs, action, next_obs = (
                self.obs[start:stop],
                self.action[start:stop],
                self.next_obs[start:stop],
            )
            if n < chunk_size:
                pad = ((0, chunk_size - n), (0, 0))
                obs, action, next_obs = (np.pad(a, pad) for a in (obs, action, next_obs))
            rewards = np.asarray(reward_fn(obs, action, next_obs), np.float32).reshape(-1)
            if rewards.shape[0] != chunk_size:
                raise ValueError(
                    f"reward_fn returned {rewards.shape[0]} rewards for {chunk_size} transitions"
                )
            self.reward[start:stop] = rewards[:n]

    # ----------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> None:
        """Write the filled part to one .npz file, atomically."""
        meta = {
            "capacity": self.capacity,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "ptr": self.ptr,
            "size": self.size,
        }
        n = self.size
        with atomic_write(path, "wb") as f:
            np.savez(
                f,
                meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                **{name: getattr(self, name)[:n] for name in self.FIELDS},
            )

    @classmethod
    def load(cls, path: str | Path) -> ReplayBuffer:
        with np.load(path) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            buf = cls(meta["capacity"], meta["obs_dim"], meta["action_dim"])
            n = meta["size"]
            for name in cls.FIELDS:
                getattr(buf, name)[:n] = data[name]
        buf.ptr, buf.size = meta["ptr"], n
        return buf


def _alternate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x's rows at the even positions, y's at the odd ones (len(x) is len(y) or one more)."""
    out = np.empty((len(x) + len(y), *x.shape[1:]), x.dtype)
    out[0::2], out[1::2] = x, y
    return out
