"""Typed arrays and buffers: transitions, batches, the replay buffer (numpy only)."""

from prefrl.data.batch import Batch
from prefrl.data.replay import ReplayBuffer
from prefrl.data.segments import (
    LABEL_TARGET,
    Label,
    PreferenceData,
    SegmentPool,
    SegmentRecorder,
    Segments,
    load_segments,
    save_segments,
)

__all__ = [
    "LABEL_TARGET",
    "Batch",
    "Label",
    "PreferenceData",
    "ReplayBuffer",
    "SegmentPool",
    "SegmentRecorder",
    "Segments",
    "load_segments",
    "save_segments",
]
