import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from prefrl.nn.dense import narrow_dot_general
from prefrl.nn.mlp import MLP

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class TanhGaussianActor(nn.Module):
    """Diagonal Gaussian over pre-squash actions; returns (mean, log_std).

    Actions are tanh(u), u ~ N(mean, std): bounded in (-1, 1), matching every prefrl env.
    """

    action_dim: int
    hidden_dims: Sequence[int]
    log_std_min: float = -10.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = MLP(self.hidden_dims)(obs)
        mean = nn.Dense(self.action_dim, dot_general=narrow_dot_general)(h)
        log_std = nn.Dense(self.action_dim, dot_general=narrow_dot_general)(h)
        log_std = jnp.clip(log_std, self.log_std_min, self.log_std_max)
        return mean, log_std


def _log_one_minus_tanh_sq(u: jax.Array) -> jax.Array:
    # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), exact and stable for large |u|.
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def tanh_gaussian_sample(
    mean: jax.Array, log_std: jax.Array, key: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample and its log-probability (summed over action dimensions)."""
    eps = jax.random.normal(key, mean.shape, mean.dtype)
    u = mean + jnp.exp(log_std) * eps
    log_prob = -0.5 * eps**2 - log_std - _HALF_LOG_2PI - _log_one_minus_tanh_sq(u)
    return jnp.tanh(u), log_prob.sum(-1)


def tanh_gaussian_log_prob(
    mean: jax.Array, log_std: jax.Array, action: jax.Array, eps: float = 1e-6
) -> jax.Array:
    """log pi(action) for given squashed actions (used by CPL/BC); clips to keep atanh finite."""
    action = jnp.clip(action, -1.0 + eps, 1.0 - eps)
    u = jnp.arctanh(action)
    z = (u - mean) * jnp.exp(-log_std)
    log_prob = -0.5 * z**2 - log_std - _HALF_LOG_2PI - _log_one_minus_tanh_sq(u)
    return log_prob.sum(-1)


class GaussianActor(nn.Module):
    """Diagonal Gaussian with a state-independent, learned log std (PPO); returns (mean, log_std).
    Samples are clipped to [-1, 1] by the caller when sent to the env."""

    action_dim: int
    hidden_dims: Sequence[int]
    init_log_std: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = MLP(self.hidden_dims, activation=nn.tanh)(obs)
        mean = nn.Dense(
            self.action_dim,
            kernel_init=nn.initializers.orthogonal(0.01),
            dot_general=narrow_dot_general,
        )(h)
        log_std = self.param(
            "log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,)
        )
        return mean, jnp.broadcast_to(log_std, mean.shape)


def gaussian_log_prob(mean: jax.Array, log_std: jax.Array, x: jax.Array) -> jax.Array:
    z = (x - mean) * jnp.exp(-log_std)
    return (-0.5 * z**2 - log_std - _HALF_LOG_2PI).sum(-1)


class BoundedMeanGaussianActor(nn.Module):
    """Diagonal Gaussian with a tanh-bounded mean and a state-independent log std in [-5, 2]
    (IQL's policy; the distribution itself is not squashed). Returns (mean, log_std)."""

    action_dim: int
    hidden_dims: Sequence[int]
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        h = MLP(self.hidden_dims, dropout_rate=self.dropout_rate)(obs, train)
        mean = jnp.tanh(nn.Dense(self.action_dim, dot_general=narrow_dot_general)(h))
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        return mean, jnp.broadcast_to(jnp.clip(log_std, -5.0, 2.0), mean.shape)
