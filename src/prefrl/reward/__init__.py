"""Reward models learned from preferences, behind one interface (`RewardModel`)."""

from prefrl.reward.base import RewardModel, load_reward_model, pearson
from prefrl.reward.ensemble import MLPRewardEnsemble, RewardConfig

__all__ = ["MLPRewardEnsemble", "RewardConfig", "RewardModel", "load_reward_model", "pearson"]
