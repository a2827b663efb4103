"""Convolutional networks on stacked 84x84 frames (uint8, channels last), scaled to [0, 1]."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def _scaled(frames: jax.Array) -> jax.Array:
    return frames.astype(jnp.float32) / 255.0


class NatureCNN(nn.Module):
    """The torso of DQN (Mnih et al. 2015): 32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1,
    a dense layer of 512; ReLU."""

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = _scaled(frames)
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(nn.Conv(features, (kernel, kernel), stride, padding="VALID")(x))
        return nn.relu(nn.Dense(512)(x.reshape(*x.shape[:-3], -1)))


class FrameActorCritic(nn.Module):
    """A shared Nature-CNN torso with a policy head (action logits) and a value head, as A2C and
    PPO on Atari use it; orthogonal initialisation as in OpenAI's baselines."""

    n_actions: int

    @nn.compact
    def __call__(self, frames: jax.Array) -> tuple[jax.Array, jax.Array]:
        h = NatureCNN()(frames)
        logits = nn.Dense(self.n_actions, kernel_init=nn.initializers.orthogonal(0.01))(h)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(h)
        return logits, value[..., 0]


class FrameRewardNet(nn.Module):
    """The reward network of Christiano et al. (2017) for Atari: 4 convolutions of 16 filters
    (7x7 stride 3, 5x5 stride 2, 3x3, 3x3; valid padding), each followed by batch norm (when
    `batch_norm`), leaky ReLU (0.01) and dropout, a dense layer of 64, one reward per frame
    stack. Batch norm normalises by the training batch's statistics (`train`), else by their
    running averages (kept in the `batch_stats` collection)."""

    dropout_rate: float = 0.5
    batch_norm: bool = False

    @nn.compact
    def __call__(self, frames: jax.Array, train: bool = False) -> jax.Array:
        x = _scaled(frames)
        for kernel, stride in ((7, 3), (5, 2), (3, 1), (3, 1)):
            x = nn.Conv(16, (kernel, kernel), stride, padding="VALID")(x)
            if self.batch_norm:
                x = nn.BatchNorm(use_running_average=not train, momentum=0.99)(x)
            x = nn.Dropout(self.dropout_rate)(nn.leaky_relu(x, 0.01), deterministic=not train)
        x = nn.leaky_relu(nn.Dense(64)(x.reshape(*x.shape[:-3], -1)), 0.01)
        return nn.Dense(1)(x)[..., 0]
