"""More out of each label (QPA, Hu et al. 2024; SURF, Park et al. 2022): a labelled pair trained
on as random crops of its two segments, the label kept (a preference between two clips mostly
holds between most of each), and unlabelled pairs trained on with the label the model itself
gives them where it is confident (pseudo-labels)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def crop_masks(key: jax.Array, copies: int, batch: int, horizon: int,
               shorter_by: tuple[int, int]) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """Masks (copies, batch, horizon) of the steps each crop keeps, of the left and the right
    segments. Both crops of a pair have one length, drawn uniformly from `horizon - shorter_by[1]`
    to `horizon - shorter_by[0]`; each starts anywhere it fits, independently of the other."""
    k_len, k_left, k_right = jax.random.split(key, 3)
    shape = (copies, batch)
    length = jax.random.randint(k_len, shape, horizon - shorter_by[1], horizon - shorter_by[0] + 1)
    steps = jnp.arange(horizon)

    def mask(k: jax.Array) -> jax.Array:
        start = jax.random.randint(k, shape, 0, horizon - length + 1)
        return (steps >= start[..., None]) & (steps < (start + length)[..., None])

    return mask(k_left), mask(k_right)


def cropped_logits(step_left: jax.Array, step_right: jax.Array,
                   masks: tuple[jax.Array, jax.Array]) -> jax.Array:  # fmt: skip
    """Logits of P(right ≻ left) of every crop, from per-step rewards (members, batch, horizon):
    shape (members, copies * batch), copy-major (crop c of pair b at c * batch + b)."""
    left, right = masks
    s_left = (step_left[:, None] * left[None]).sum(-1)  # (M, copies, batch)
    s_right = (step_right[:, None] * right[None]).sum(-1)
    return (s_right - s_left).reshape(step_left.shape[0], -1)


def pseudo_labels(logits: jax.Array, threshold: float) -> tuple[jax.Array, jax.Array]:
    """Each member's own label of unlabelled pairs (1: right preferred) and whether it is
    confident enough to train on: P(its choice) > `threshold`. No gradient flows through them."""
    p = jax.nn.sigmoid(jax.lax.stop_gradient(logits))
    return (p > 0.5).astype(logits.dtype), jnp.maximum(p, 1 - p) > threshold
