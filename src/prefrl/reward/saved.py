"""Any saved reward model back from its directory, whatever its kind."""

from __future__ import annotations

import json
from pathlib import Path

from prefrl.reward.base import RewardModel
from prefrl.reward.ensemble import MLPRewardEnsemble
from prefrl.reward.frames import FrameRewardModel
from prefrl.reward.segment_models import KINDS, SegmentRewardModel


def load_reward_model(path: str | Path) -> RewardModel:
    """Load any saved reward model (a directory written by `RewardModel.save`)."""
    kinds: dict[str, type[RewardModel]] = {
        MLPRewardEnsemble.kind: MLPRewardEnsemble,
        FrameRewardModel.kind: FrameRewardModel,
    }
    kinds.update(dict.fromkeys(KINDS, SegmentRewardModel))
    path = Path(path)
    meta_path = path / "config.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{path} is not a saved reward model (no config.json)")
    kind = json.loads(meta_path.read_text()).get("kind")
    if kind not in kinds:
        raise ValueError(f"{path}: unknown reward model kind {kind!r}; known: {sorted(kinds)}")
    return kinds[kind].load(path)
