from collections.abc import Callable, Sequence

import flax.linen as nn
import jax


class MLP(nn.Module):
    """Dense layers with optional dropout and LayerNorm (DroQ order: Dense, Dropout, LayerNorm, act).

    `activate_final` applies the hidden-layer treatment after the last layer too, for trunks that
    feed an output head.
    """

    hidden_dims: Sequence[int]
    activation: Callable[[jax.Array], jax.Array] = nn.relu
    layer_norm: bool = False
    dropout_rate: float = 0.0
    activate_final: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        last = len(self.hidden_dims) - 1
        for i, width in enumerate(self.hidden_dims):
            x = nn.Dense(width)(x)
            if i < last or self.activate_final:
                if self.dropout_rate > 0.0:
                    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
                if self.layer_norm:
                    x = nn.LayerNorm()(x)
                x = self.activation(x)
        return x
