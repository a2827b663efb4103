"""Soft Actor-Critic with a vmapped critic ensemble, DroQ options and update-to-data ratio > 1.

One call of `SAC.update` does `utd_ratio` critic steps (a `lax.scan` over the batch cut into
consecutive minibatches), then one actor and one temperature step on the last minibatch, all
inside a single jitted function. With `utd_ratio=1` this is plain SAC (Haarnoja et al. 2018);
with dropout + LayerNorm critics and a high ratio it is DroQ.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from prefrl.data.batch import Batch
from prefrl.fielddocs import document_fields
from prefrl.nn import CriticEnsemble, TanhGaussianActor, tanh_gaussian_sample
from prefrl.rundir.config import check_fields
from prefrl.rundir.pytree import state_from_bytes
from prefrl.xla import jit_step


@document_fields
@dataclasses.dataclass(frozen=True)
class SACConfig:
    """SAC hyper-parameters. Defaults are the SAC paper's MuJoCo settings."""

    hidden_dims: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor and of each critic."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    temperature_lr: float = 3e-4
    """Adam learning rate of the entropy temperature (when learn_temperature)."""
    discount: float = 0.99
    """Discount factor γ of the TD target, in [0, 1]."""
    tau: float = 0.005
    """Polyak rate of the target critics (RoboPianist uses 0.01)."""
    batch_size: int = 256
    """Transitions per gradient step, drawn from the replay buffer."""
    num_critics: int = 2
    """Critics in the ensemble (RFCL uses 10)."""
    num_min_critics: int = 2
    """Target = min over this many critics, sampled from the ensemble when it is larger."""
    critic_layer_norm: bool = False
    """LayerNorm after each hidden layer of the critics (DroQ: True, with dropout)."""
    critic_dropout: float = 0.0
    """Dropout rate in the critics (DroQ: 0.01, with layer norm)."""
    init_temperature: float = 1.0
    """The entropy temperature α at the start (all along when learn_temperature is False)."""
    learn_temperature: bool = True
    """False: the temperature stays at init_temperature (a fixed entropy weight, as in the first
    SAC paper) instead of being tuned towards target_entropy."""
    target_entropy: float | None = None
    """None: -target_entropy_scale x action_dim."""
    target_entropy_scale: float = 1.0
    """The target entropy per action dimension, negated, when target_entropy is None (1: the
    SAC paper's -|A|; RFCL: 0.5)."""
    utd_ratio: int = 1
    """Critic gradient steps per update call (one actor step per call)."""
    backup_entropy: bool = True
    """Include the entropy bonus in the TD target."""

    def __post_init__(self) -> None:
        checks = {
            "hidden_dims": (
                bool(self.hidden_dims) and all(h > 0 for h in self.hidden_dims),
                "one or more positive widths",
            ),
            "discount": (0.0 <= self.discount <= 1.0, "a value in [0, 1]"),
            "tau": (0.0 < self.tau <= 1.0, "a value in (0, 1]"),
            "batch_size": (self.batch_size > 0, "a positive integer"),
            "num_critics": (self.num_critics >= 1, "at least 1"),
            "num_min_critics": (
                1 <= self.num_min_critics <= self.num_critics,
                f"between 1 and num_critics ({self.num_critics})",
            ),
            "critic_dropout": (0.0 <= self.critic_dropout < 1.0, "a rate in [0, 1)"),
            "init_temperature": (self.init_temperature > 0.0, "a positive number"),
            "target_entropy_scale": (self.target_entropy_scale > 0.0, "a positive number"),
            "utd_ratio": (self.utd_ratio >= 1, "a positive integer"),
        }
        check_fields(self, checks, "SACConfig.")


class SACState(struct.PyTreeNode):
    actor_params: dict
    actor_opt: optax.OptState
    critic_params: dict
    target_critic_params: dict
    critic_opt: optax.OptState
    log_temperature: jax.Array
    temperature_opt: optax.OptState
    step: jax.Array


class _Nets(NamedTuple):
    actor: TanhGaussianActor
    critic: CriticEnsemble


class SAC:
    """Builds the networks and optimisers for given spaces; holds no mutable state itself."""

    def __init__(self, config: SACConfig, obs_dim: int, action_dim: int):
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.target_entropy = (
            -config.target_entropy_scale * action_dim
            if config.target_entropy is None
            else config.target_entropy
        )
        self.nets = _Nets(
            actor=TanhGaussianActor(action_dim, config.hidden_dims),
            critic=CriticEnsemble(
                config.hidden_dims,
                num=config.num_critics,
                layer_norm=config.critic_layer_norm,
                dropout_rate=config.critic_dropout,
            ),
        )
        self.actor_tx = optax.adam(config.actor_lr)
        self.critic_tx = optax.adam(config.critic_lr)
        self.temperature_tx = optax.adam(config.temperature_lr)
        self.update = jit_step(self._update, donate_argnums=0)
        self.act = jax.jit(self._act, static_argnames="deterministic")

    # ----------------------------------------------------------------------------- state
    def init(self, key: jax.Array) -> SACState:
        k_actor, k_critic = jax.random.split(key)
        obs = jnp.zeros((1, self.obs_dim), jnp.float32)
        action = jnp.zeros((1, self.action_dim), jnp.float32)
        actor_params = self.nets.actor.init(k_actor, obs)
        critic_params = self.nets.critic.init(k_critic, obs, action)
        log_temperature = jnp.asarray(np.log(self.config.init_temperature), jnp.float32)
        return SACState(
            actor_params=actor_params,
            actor_opt=self.actor_tx.init(actor_params),
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jnp.copy, critic_params),  # own buffers: donated
            critic_opt=self.critic_tx.init(critic_params),
            log_temperature=log_temperature,
            temperature_opt=self.temperature_tx.init(log_temperature),
            step=jnp.zeros((), jnp.int32),
        )

    def state_to_bytes(self, state: SACState) -> bytes:
        return flax.serialization.to_bytes(jax.device_get(state))

    def state_from_bytes(self, data: bytes) -> SACState:
        template = self.init(jax.random.PRNGKey(0))
        return state_from_bytes(template, data)

    # ----------------------------------------------------------------------------- acting
    def _act(
        self, actor_params: dict, obs: jax.Array, key: jax.Array, step, deterministic: bool = False
    ) -> jax.Array:
        """Action for `obs` (batched or not). `step` is folded into `key` so callers may pass the
        same base key every call."""
        mean, log_std = self.nets.actor.apply(actor_params, obs)
        if deterministic:
            return jnp.tanh(mean)
        action, _ = tanh_gaussian_sample(mean, log_std, jax.random.fold_in(key, step))
        return action

    # ----------------------------------------------------------------------------- losses
    def _critic_step(self, state: SACState, batch: Batch, key: jax.Array):
        cfg = self.config
        k_next, k_drop_target, k_drop, k_subset = jax.random.split(key, 4)
        temperature = jnp.exp(state.log_temperature)

        mean, log_std = self.nets.actor.apply(state.actor_params, batch.next_obs)
        next_action, next_log_prob = tanh_gaussian_sample(mean, log_std, k_next)
        next_q = self.nets.critic.apply(
            state.target_critic_params,
            batch.next_obs,
            next_action,
            train=True,
            rngs={"dropout": k_drop_target},
        )
        if cfg.num_min_critics < cfg.num_critics:
            subset = jax.random.choice(
                k_subset, cfg.num_critics, (cfg.num_min_critics,), replace=False
            )
            next_q = next_q[subset]
        next_v = next_q.min(0)
        if cfg.backup_entropy:
            next_v = next_v - temperature * next_log_prob
        target = batch.reward + cfg.discount * (1.0 - batch.terminated) * next_v
        target = jax.lax.stop_gradient(target)

        def loss_fn(params):
            q = self.nets.critic.apply(
                params, batch.obs, batch.action, train=True, rngs={"dropout": k_drop}
            )
            # Sum over members of each member's MSE: every critic gets its full gradient.
            loss = ((q - target[None]) ** 2).mean(-1).sum()
            return loss, q.mean()

        (loss, q_mean), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.critic_params)
        updates, critic_opt = self.critic_tx.update(grads, state.critic_opt, state.critic_params)
        critic_params = optax.apply_updates(state.critic_params, updates)
        target_params = optax.incremental_update(critic_params, state.target_critic_params, cfg.tau)
        state = state.replace(
            critic_params=critic_params, target_critic_params=target_params, critic_opt=critic_opt
        )
        return state, {"critic_loss": loss, "q_mean": q_mean}

    def _actor_step(self, state: SACState, batch: Batch, key: jax.Array):
        k_pi, k_drop = jax.random.split(key)
        temperature = jnp.exp(state.log_temperature)

        def loss_fn(params):
            mean, log_std = self.nets.actor.apply(params, batch.obs)
            action, log_prob = tanh_gaussian_sample(mean, log_std, k_pi)
            q = self.nets.critic.apply(
                state.critic_params, batch.obs, action, train=True, rngs={"dropout": k_drop}
            )
            # Two critics: pessimistic min (SAC). Larger ensembles: their mean (REDQ, RFCL).
            q_pi = q.min(0) if self.config.num_critics <= 2 else q.mean(0)
            loss = (temperature * log_prob - q_pi).mean()
            return loss, log_prob.mean()

        (loss, log_prob), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.actor_params)
        updates, actor_opt = self.actor_tx.update(grads, state.actor_opt, state.actor_params)
        actor_params = optax.apply_updates(state.actor_params, updates)

        entropy = -jax.lax.stop_gradient(log_prob)

        def temperature_loss_fn(log_temperature):
            return log_temperature * (entropy - self.target_entropy)

        t_loss, t_grad = jax.value_and_grad(temperature_loss_fn)(state.log_temperature)
        log_temperature, temperature_opt = state.log_temperature, state.temperature_opt
        if self.config.learn_temperature:
            t_updates, temperature_opt = self.temperature_tx.update(t_grad, temperature_opt)
            log_temperature = optax.apply_updates(log_temperature, t_updates)

        state = state.replace(
            actor_params=actor_params,
            actor_opt=actor_opt,
            log_temperature=log_temperature,
            temperature_opt=temperature_opt,
        )
        metrics = {
            "actor_loss": loss,
            "entropy": entropy,
            "temperature": temperature,
            "temperature_loss": t_loss,
        }
        return state, metrics

    def _update(self, state: SACState, batch: Batch, key: jax.Array):
        """`batch` holds utd_ratio * batch_size transitions; `key` is folded with `state.step`."""
        cfg = self.config
        key = jax.random.fold_in(key, state.step)
        k_critic, k_actor = jax.random.split(key)
        if cfg.utd_ratio == 1:
            state, critic_metrics = self._critic_step(state, batch, k_critic)
            last = batch
        else:
            minibatches = jax.tree.map(
                lambda x: x.reshape(cfg.utd_ratio, cfg.batch_size, *x.shape[1:]), batch
            )
            keys = jax.random.split(k_critic, cfg.utd_ratio)
            state, critic_metrics = jax.lax.scan(
                lambda s, xs: self._critic_step(s, *xs), state, (minibatches, keys)
            )
            critic_metrics = jax.tree.map(jnp.mean, critic_metrics)
            last = jax.tree.map(lambda x: x[-1], minibatches)
        state, actor_metrics = self._actor_step(state, last, k_actor)
        state = state.replace(step=state.step + 1)
        return state, {**critic_metrics, **actor_metrics}
