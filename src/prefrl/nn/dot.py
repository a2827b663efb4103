"""The reward network the seed (mrahtz/learning-from-human-preferences) trains on MovingDot: not
the Atari CNN, but the dot's position in the newest frame and the action taken there, through
three dense layers of 64. MovingDot's reward depends on the action (towards or away from the
centre), which no frame of the stack an action is chosen on shows; the seed writes the action
into a pixel of the frame to get it to this network, prefrl passes it beside the frames."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def dot_position(frames: jax.Array) -> jax.Array:
    """(..., 84, 84, 4) stacks -> (..., 2): the brightest column and row of the newest frame,
    scaled to [0, 1] (the dot's x and y)."""
    newest = frames[..., -1].astype(jnp.float32)
    x = jnp.argmax(newest.sum(-2), -1)
    y = jnp.argmax(newest.sum(-1), -1)
    return jnp.stack([x, y], -1).astype(jnp.float32) / (frames.shape[-2] - 1)


class DotRewardNet(nn.Module):
    """One reward per (stack, action) of MovingDot; the action one-hot (the seed: a/4)."""

    n_actions: int

    @nn.compact
    def __call__(self, frames: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([dot_position(frames), jax.nn.one_hot(action, self.n_actions)], -1)
        for _ in range(3):
            x = nn.relu(nn.Dense(64)(x))
        return nn.Dense(1)(x)[..., 0]
