"""Network definitions only (Flax linen): no losses, no optimisers, no training state."""

from prefrl.nn.mlp import MLP
from prefrl.nn.critic import Critic, CriticEnsemble
from prefrl.nn.policy import TanhGaussianActor, tanh_gaussian_sample, tanh_gaussian_log_prob

__all__ = [
    "MLP",
    "Critic",
    "CriticEnsemble",
    "TanhGaussianActor",
    "tanh_gaussian_sample",
    "tanh_gaussian_log_prob",
]
