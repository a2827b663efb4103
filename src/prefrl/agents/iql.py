"""Implicit Q-Learning (Kostrikov et al. 2022) for offline RL.

Per step: V(s) by expectile regression towards min of the target twin critics, Q(s, a) towards
r + γ (1 - terminal) V(s'), the actor by advantage-weighted regression (weights exp(β A),
capped at 100), then a Polyak update of the target critics. The dataset lives on the device and
`update` runs `steps_per_call` steps in one jitted `lax.scan`, sampling minibatches itself.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from prefrl.fielddocs import document_fields
from prefrl.nn import BoundedMeanGaussianActor, CriticEnsemble, ValueNet, gaussian_log_prob
from prefrl.rundir.config import check_fields
from prefrl.rundir.pytree import state_from_bytes
from prefrl.xla import jit_step


@document_fields
@dataclasses.dataclass(frozen=True)
class IQLConfig:
    """IQL hyper-parameters; defaults are the published MuJoCo (locomotion) settings."""

    hidden_dims: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor, the critics and the value network."""
    actor_lr: float = 3e-4
    """Decayed to 0 along a cosine over `steps` (as the published runs)."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    value_lr: float = 3e-4
    """Adam learning rate of the value network."""
    discount: float = 0.99
    """Discount factor γ, in [0, 1]."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    batch_size: int = 256
    """Dataset transitions per gradient step."""
    expectile: float = 0.7
    """0.7 locomotion and Adroit, 0.9 AntMaze."""
    temperature: float = 3.0
    """β of the advantage weights: 3.0 locomotion, 10.0 AntMaze, 0.5 Adroit."""
    actor_dropout: float = 0.0
    """0.1 on Adroit."""
    steps: int = 1_000_000
    """Gradient steps in all (sets the actor's cosine schedule)."""

    def __post_init__(self) -> None:
        checks = {
            "hidden_dims": (
                bool(self.hidden_dims) and all(h > 0 for h in self.hidden_dims),
                "one or more positive widths",
            ),
            "discount": (0 <= self.discount <= 1, "a value in [0, 1]"),
            "tau": (0 < self.tau <= 1, "a value in (0, 1]"),
            "batch_size": (self.batch_size >= 1, "a positive integer"),
            "expectile": (0 < self.expectile < 1, "a value in (0, 1)"),
            "temperature": (self.temperature > 0, "a positive number"),
            "actor_dropout": (0 <= self.actor_dropout < 1, "a rate in [0, 1)"),
            "steps": (self.steps >= 1, "a positive integer"),
        }
        check_fields(self, checks, "IQL ")


IQL_PRESETS = {
    "mujoco": IQLConfig(),
    "antmaze": IQLConfig(expectile=0.9, temperature=10.0),
    "adroit": IQLConfig(expectile=0.7, temperature=0.5, actor_dropout=0.1),
}


class IQLState(struct.PyTreeNode):
    actor_params: dict
    actor_opt: optax.OptState
    critic_params: dict
    target_critic_params: dict
    critic_opt: optax.OptState
    value_params: dict
    value_opt: optax.OptState
    step: jax.Array


class OfflineArrays(NamedTuple):
    """The dataset on the device."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array
    terminal: jax.Array


class IQL:
    def __init__(self, config: IQLConfig, obs_dim: int, action_dim: int):
        self.config, self.obs_dim, self.action_dim = config, obs_dim, action_dim
        self.actor = BoundedMeanGaussianActor(action_dim, config.hidden_dims, config.actor_dropout)
        self.critic = CriticEnsemble(config.hidden_dims, num=2)
        self.value = ValueNet(config.hidden_dims, activation=nn.relu)
        schedule = optax.cosine_decay_schedule(config.actor_lr, config.steps)
        self.actor_tx = optax.adam(schedule)
        self.critic_tx = optax.adam(config.critic_lr)
        self.value_tx = optax.adam(config.value_lr)
        self.update = jit_step(self._update, static_argnames="steps", donate_argnums=0)
        self.act = jax.jit(lambda p, o: self.actor.apply(p, o)[0])

    def init(self, key) -> IQLState:
        ka, kc, kv = jax.random.split(key, 3)
        obs = jnp.zeros((1, self.obs_dim))
        action = jnp.zeros((1, self.action_dim))
        actor = self.actor.init(ka, obs)
        critic = self.critic.init(kc, obs, action)
        value = self.value.init(kv, obs)
        return IQLState(
            actor_params=actor,
            actor_opt=self.actor_tx.init(actor),
            critic_params=critic,
            target_critic_params=jax.tree.map(jnp.copy, critic),
            critic_opt=self.critic_tx.init(critic),
            value_params=value,
            value_opt=self.value_tx.init(value),
            step=jnp.zeros((), jnp.int32),
        )

    def state_to_bytes(self, state: IQLState) -> bytes:
        return flax.serialization.to_bytes(jax.device_get(state))

    def state_from_bytes(self, data: bytes) -> IQLState:
        return state_from_bytes(self.init(jax.random.key(0)), data)

    @staticmethod
    def to_device(obs, action, reward, next_obs, terminal) -> OfflineArrays:
        arrays = (obs, action, reward, next_obs, terminal)
        return OfflineArrays(*(jnp.asarray(np.asarray(x, np.float32)) for x in arrays))

    # ------------------------------------------------------------------------------- one step
    def _step(self, state: IQLState, data: OfflineArrays, key):
        cfg = self.config
        k_idx, k_drop = jax.random.split(key)
        idx = jax.random.randint(k_idx, (cfg.batch_size,), 0, data.obs.shape[0])
        obs, action, reward = data.obs[idx], data.action[idx], data.reward[idx]
        next_obs, terminal = data.next_obs[idx], data.terminal[idx]

        target_q = self.critic.apply(state.target_critic_params, obs, action).min(0)

        def value_loss(p):
            v = self.value.apply(p, obs)
            diff = target_q - v
            weight = jnp.where(diff > 0, cfg.expectile, 1.0 - cfg.expectile)
            return (weight * diff**2).mean(), v

        (v_loss, v), grads = jax.value_and_grad(value_loss, has_aux=True)(state.value_params)
        updates, value_opt = self.value_tx.update(grads, state.value_opt)
        value_params = optax.apply_updates(state.value_params, updates)

        adv = target_q - self.value.apply(value_params, obs)
        weights = jnp.minimum(jnp.exp(cfg.temperature * adv), 100.0)

        def actor_loss(p):
            mean, log_std = self.actor.apply(p, obs, True, rngs={"dropout": k_drop})
            return -(weights * gaussian_log_prob(mean, log_std, action)).mean()

        a_loss, grads = jax.value_and_grad(actor_loss)(state.actor_params)
        updates, actor_opt = self.actor_tx.update(grads, state.actor_opt)
        actor_params = optax.apply_updates(state.actor_params, updates)

        next_v = self.value.apply(value_params, next_obs)
        target = reward + cfg.discount * (1.0 - terminal) * next_v

        def critic_loss(p):
            q = self.critic.apply(p, obs, action)
            return ((q - target[None]) ** 2).mean(-1).sum(), q.mean()

        (c_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(state.critic_params)
        updates, critic_opt = self.critic_tx.update(grads, state.critic_opt)
        critic_params = optax.apply_updates(state.critic_params, updates)
        target_params = optax.incremental_update(critic_params, state.target_critic_params, cfg.tau)
        state = IQLState(
            actor_params=actor_params,
            actor_opt=actor_opt,
            critic_params=critic_params,
            target_critic_params=target_params,
            critic_opt=critic_opt,
            value_params=value_params,
            value_opt=value_opt,
            step=state.step + 1,
        )
        metrics = {
            "value_loss": v_loss,
            "actor_loss": a_loss,
            "critic_loss": c_loss,
            "q_mean": q_mean,
            "v_mean": v.mean(),
            "adv_mean": adv.mean(),
        }
        return state, metrics

    def _update(self, state: IQLState, data: OfflineArrays, key, steps: int):
        """`steps` gradient steps; metrics are their means."""
        keys = jax.random.split(jax.random.fold_in(key, state.step), steps)
        state, metrics = jax.lax.scan(lambda s, k: self._step(s, data, k), state, keys)
        return state, jax.tree.map(jnp.mean, metrics)
