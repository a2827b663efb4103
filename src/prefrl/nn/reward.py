from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from prefrl.nn.mlp import MLP


class RewardNet(nn.Module):
    """r̂(s, a) -> scalar per step (PEBBLE: 3x256, LeakyReLU, tanh output)."""

    hidden_dims: Sequence[int]
    output: str = "tanh"
    """"tanh" bounds each step's reward in (-1, 1); "linear" leaves it unbounded."""
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        x = MLP(self.hidden_dims, activation=nn.leaky_relu, dropout_rate=self.dropout_rate)(
            x, train
        )
        # A zero output layer: every segment sum starts at 0 (P = 0.5 for every pair). A random
        # one sums H random outputs into large, arbitrary logits that small-label fits with few
        # steps struggle to undo (measured: Pendulum fits stuck below chance accuracy).
        r = nn.Dense(1, kernel_init=nn.initializers.zeros)(x)[..., 0]
        return jnp.tanh(r) if self.output == "tanh" else r


class RewardNetEnsemble(nn.Module):
    """`num` reward nets in one vmapped call; output shape (num, *batch)."""

    hidden_dims: Sequence[int]
    num: int = 3
    output: str = "tanh"
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False) -> jax.Array:
        ensemble = nn.vmap(
            RewardNet,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num,
        )
        return ensemble(self.hidden_dims, self.output, self.dropout_rate)(obs, action, train)
