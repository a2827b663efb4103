"""Reward models learned from preferences, behind one interface (`RewardModel`)."""

from prefrl.reward.base import RewardModel, pearson
from prefrl.reward.config import RewardConfig
from prefrl.reward.ensemble import MLPRewardEnsemble
from prefrl.reward.saved import load_reward_model

__all__ = ["MLPRewardEnsemble", "RewardConfig", "RewardModel", "load_reward_model", "pearson"]
