from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from prefrl.nn.mlp import MLP


class Critic(nn.Module):
    """Q(s, a) -> scalar per sample."""

    hidden_dims: Sequence[int]
    layer_norm: bool = False
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        x = MLP(self.hidden_dims, layer_norm=self.layer_norm, dropout_rate=self.dropout_rate)(
            x, train
        )
        return nn.Dense(1)(x)[..., 0]


class CriticEnsemble(nn.Module):
    """`num` independent critics evaluated in one vmapped call; output shape (num, batch)."""

    hidden_dims: Sequence[int]
    num: int = 2
    layer_norm: bool = False
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False) -> jax.Array:
        ensemble = nn.vmap(
            Critic,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num,
        )
        return ensemble(self.hidden_dims, self.layer_norm, self.dropout_rate)(obs, action, train)


class ValueNet(nn.Module):
    """V(s) -> scalar per sample (PPO: tanh; IQL: relu)."""

    hidden_dims: Sequence[int]
    activation: Callable[[jax.Array], jax.Array] = nn.tanh

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return nn.Dense(1)(MLP(self.hidden_dims, activation=self.activation)(obs))[..., 0]
