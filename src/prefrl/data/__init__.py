"""Typed arrays and buffers: transitions, batches, the replay buffer (numpy only)."""

from prefrl.data.batch import Batch
from prefrl.data.replay import ReplayBuffer

__all__ = ["Batch", "ReplayBuffer"]
