"""Contrastive Preference Learning (Hejna et al. 2023): a policy learned straight from
preferences between segments, no reward model, no critic.

A segment's advantage is A(σ) = α Σ_t log π(a_t | s_t). For the preferred σ⁺ and the other σ⁻
the loss is -log(exp A⁺ / (exp A⁺ + exp(λ A⁻))) = softplus(λ A⁻ - A⁺), with a bias λ in (0, 1]
(λ < 1 makes the loss conservative: lowering the other segment's likelihood helps less than
raising the preferred one's); an equal label counts half for each order. A regulariser keeps the
fine-tuned policy near the original one: the squared distance of its outputs (mean and log std)
to the frozen original's on the same states (`mse`, RoboPianist's working setting), the KL from
the original's Gaussian (`kl`), or behaviour cloning of the segments' actions (`bc`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from flax import struct

from prefrl.fielddocs import document_fields
from prefrl.nn import TanhGaussianActor, tanh_gaussian_log_prob
from prefrl.rundir.config import check_fields

REGULARISERS = ("mse", "kl", "bc", "none")


@document_fields
@dataclasses.dataclass(frozen=True)
class CPLConfig:
    """CPL fine-tuning; defaults are the working RoboPianist settings."""

    lr: float = 1e-4
    """Adam learning rate of the policy."""
    batch_size: int = 32
    """Pairs per gradient step."""
    alpha: float = 0.1
    """Temperature α of the segment advantage α Σ log π."""
    bias: float = 0.5
    """λ: the other segment's advantage is scaled by it (1: the plain contrastive loss)."""
    preference_weight: float = 1.0
    """Weight of the preference (CPL) loss; 0 with a conservative term of weight 1 is behaviour
    cloning of the rated segments alone."""
    mean_only: bool = False
    """Take log π with the policy's log std held fixed (no gradient through it), so the
    preferences can move the action mean only: pairs of noisy segments cannot be ordered by
    narrowing or widening the spread around an unchanged mean."""
    conservative: str = "mse"
    """mse (to the frozen original policy's outputs), kl, bc or none."""
    conservative_weight: float = 0.01
    """Weight of the conservative term (see conservative)."""
    grad_clip: float = 1.0
    """Global gradient-norm clipping (0: none)."""

    def __post_init__(self) -> None:
        checks = {
            "lr": (self.lr > 0, "a positive number"),
            "batch_size": (self.batch_size >= 1, "a positive integer"),
            "alpha": (self.alpha > 0, "a positive number"),
            "bias": (0 < self.bias <= 1, "a value in (0, 1]"),
            "preference_weight": (self.preference_weight >= 0, ">= 0"),
            "conservative": (self.conservative in REGULARISERS, f"one of {REGULARISERS}"),
            "conservative_weight": (self.conservative_weight >= 0, ">= 0"),
            "grad_clip": (self.grad_clip >= 0, ">= 0 (0: no clipping)"),
        }
        check_fields(self, checks, "CPL -")


class CPLState(struct.PyTreeNode):
    params: dict
    opt_state: optax.OptState
    step: jax.Array


def cpl_loss(adv_left, adv_right, target, weight, bias: float):
    """Mean CPL loss over pairs. `target` is P(right preferred): 1 right, 0 left, 0.5 equal (both
    orders, half each); `weight` masks padding and skipped pairs."""
    right_wins = jax.nn.softplus(bias * adv_left - adv_right)
    left_wins = jax.nn.softplus(bias * adv_right - adv_left)
    per_pair = target * right_wins + (1.0 - target) * left_wins
    return (weight * per_pair).sum() / jnp.maximum(weight.sum(), 1.0)


class CPL:
    """Fine-tunes a SAC actor (`TanhGaussianActor` parameters) with the CPL loss."""

    def __init__(self, config: CPLConfig, action_dim: int, hidden_dims: tuple[int, ...]):
        self.config = config
        self.actor = TanhGaussianActor(action_dim, hidden_dims)
        tx = [optax.clip_by_global_norm(config.grad_clip)] if config.grad_clip > 0 else []
        self.tx = optax.chain(*tx, optax.adam(config.lr))
        self.update = jax.jit(self._update)
        self.advantages = jax.jit(self._advantages)

    def init(self, actor_params: dict) -> CPLState:
        params = jax.tree.map(jnp.array, actor_params)  # own copies: the original stays frozen
        return CPLState(params=params, opt_state=self.tx.init(params), step=jnp.zeros((), int))

    def _advantages(self, params, obs, action):
        """α Σ_t log π(a_t|s_t) of segments (B, T, dim) -> (B,)."""
        mean, log_std = self.actor.apply(params, obs)
        if self.config.mean_only:
            log_std = jax.lax.stop_gradient(log_std)
        return self.config.alpha * tanh_gaussian_log_prob(mean, log_std, action).sum(-1)

    def _regulariser(self, params, ref_params, obs, action):
        kind = self.config.conservative
        if kind == "none":
            return jnp.zeros(())
        mean, log_std = self.actor.apply(params, obs)
        if kind == "bc":
            return -tanh_gaussian_log_prob(mean, log_std, action).mean()
        ref_mean, ref_log_std = jax.lax.stop_gradient(self.actor.apply(ref_params, obs))
        if kind == "mse":
            return ((mean - ref_mean) ** 2 + (log_std - ref_log_std) ** 2).sum(-1).mean()
        # KL(original || fine-tuned) of the pre-squash Gaussians (tanh is shared, so it cancels).
        var, ref_var = jnp.exp(2 * log_std), jnp.exp(2 * ref_log_std)
        kl = log_std - ref_log_std + (ref_var + (ref_mean - mean) ** 2) / (2 * var) - 0.5
        return kl.sum(-1).mean()

    def _update(self, state: CPLState, ref_params, batch: dict):
        """One step on `batch` (obs_left/right (B, T, obs), action_left/right, target (B,),
        weight (B,)); returns (state, metrics)."""
        cfg = self.config

        def loss_fn(p):
            a_left = self._advantages(p, batch["obs_left"], batch["action_left"])
            a_right = self._advantages(p, batch["obs_right"], batch["action_right"])
            pref = cpl_loss(a_left, a_right, batch["target"], batch["weight"], cfg.bias)
            obs = jnp.concatenate([batch["obs_left"], batch["obs_right"]], 1)
            action = jnp.concatenate([batch["action_left"], batch["action_right"]], 1)
            reg = self._regulariser(p, ref_params, obs, action)
            total = cfg.preference_weight * pref + cfg.conservative_weight * reg
            return total, (pref, reg, a_left, a_right)

        (loss, (pref, reg, a_left, a_right)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params
        )
        updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        decided = (batch["target"] != 0.5) & (batch["weight"] > 0)
        correct = ((a_right > a_left) == (batch["target"] > 0.5)) & decided
        metrics = {
            "loss": loss,
            "preference_loss": pref,
            "conservative_loss": reg,
            "accuracy": correct.sum() / jnp.maximum(decided.sum(), 1),
            "grad_norm": optax.tree.norm(grads),
            # With λ < 1 the loss also falls when every likelihood rises: once advantages are
            # positive, A⁺ > λ A⁻ holds for pairs still ordered wrongly. A rising mean beside a
            # flat accuracy shows the loss being met that way.
            "advantage_mean": 0.5 * (a_left.mean() + a_right.mean()),
            # 1 while every new parameter is finite: the NaN guard reads one scalar per step
            # instead of copying the parameters to the host.
            "params_finite": jnp.all(
                jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(params)])
            ).astype(jnp.float32),
        }
        return CPLState(params=params, opt_state=opt_state, step=state.step + 1), metrics
