"""Network definitions only (Flax linen): no losses, no optimisers, no training state."""

from prefrl.nn.critic import Critic, CriticEnsemble
from prefrl.nn.mlp import MLP
from prefrl.nn.policy import TanhGaussianActor, tanh_gaussian_log_prob, tanh_gaussian_sample

__all__ = [
    "MLP",
    "Critic",
    "CriticEnsemble",
    "TanhGaussianActor",
    "tanh_gaussian_log_prob",
    "tanh_gaussian_sample",
]
