"""Network definitions only (Flax linen): no losses, no optimisers, no training state."""

from prefrl.nn.critic import Critic, CriticEnsemble, ValueNet
from prefrl.nn.mlp import MLP
from prefrl.nn.policy import (
    BoundedMeanGaussianActor,
    GaussianActor,
    TanhGaussianActor,
    gaussian_log_prob,
    tanh_gaussian_log_prob,
    tanh_gaussian_sample,
)
from prefrl.nn.reward import RewardNet, RewardNetEnsemble

__all__ = [
    "MLP",
    "BoundedMeanGaussianActor",
    "Critic",
    "CriticEnsemble",
    "GaussianActor",
    "RewardNet",
    "RewardNetEnsemble",
    "TanhGaussianActor",
    "ValueNet",
    "gaussian_log_prob",
    "tanh_gaussian_log_prob",
    "tanh_gaussian_sample",
]
