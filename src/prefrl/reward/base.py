"""The interface every prefrl reward model shares (`load_reward_model` is in `reward.saved`)."""

from __future__ import annotations

import abc
from pathlib import Path

import numpy as np

from prefrl.data.segments import PreferenceData


class RewardModel(abc.ABC):
    """Learns per-step rewards from labelled pairs of segments.

    Markovian models (the MLP ensemble) accept any leading shape in `predict`; sequence models
    (LSTM, Preference Transformer) take whole segments, shape (N, H, dim).
    """

    kind: str  # name in the registry of `load_reward_model`
    num_members: int

    @abc.abstractmethod
    def fit(self, data: PreferenceData) -> dict[str, float]:
        """Train on the labelled pairs (skip labels ignored); returns metrics, including
        `reward/val_accuracy` on the held-out share of the labels."""

    @abc.abstractmethod
    def member_rewards(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Normalised per-step rewards of each member: shape (num_members, *obs.shape[:-1])."""

    def predict(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """The learned reward: the members' mean, shape obs.shape[:-1]."""
        return self.member_rewards(obs, action).mean(0)

    def pair_probs(
        self, obs_left: np.ndarray, action_left: np.ndarray, obs_right, action_right
    ) -> np.ndarray:
        """P(right ≻ left) by each member (Bradley-Terry on segment sums): (num_members, N)."""
        r_left = self.member_rewards(obs_left, action_left).sum(-1)
        r_right = self.member_rewards(obs_right, action_right).sum(-1)
        return 1.0 / (1.0 + np.exp(np.clip(r_left - r_right, -50.0, 50.0)))

    @abc.abstractmethod
    def save(self, path: str | Path) -> None:
        """Write the model to the directory `path` (config.json + weights)."""

    @classmethod
    @abc.abstractmethod
    def load(cls, path: str | Path) -> RewardModel: ...


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Correlation of two 1-D arrays (NaN when either is constant)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
