"""Advantage actor-critic (A2C, the synchronous A3C of Mnih et al. 2016) on stacked frames, with
the settings learning-from-human-preferences trained Atari and MovingDot with.

One update per rollout of `n_steps` steps of each of `n_envs` envs: n-step returns bootstrapped
from the value of the observation after the rollout, policy gradient with the advantage
(return - value), a value loss, an entropy bonus, gradients clipped by global norm, RMSProp.
An episode cut by a time limit is bootstrapped by the loop (`bootstrap_truncated`), not cut off.
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

from prefrl.fielddocs import document_fields
from prefrl.nn.conv import FrameActorCritic
from prefrl.rundir.config import check_fields
from prefrl.rundir.pytree import state_from_bytes
from prefrl.xla import SummedGrads, jit_step

FRAMES_PER_PASS = 16
"""Frames whose gradients one compiled call computes (`prefrl.xla.SummedGrads`): the fastest of
8-256 on a 2-core CPU for the Nature CNN (docs/performance.md)."""


@document_fields
@dataclasses.dataclass(frozen=True)
class A2CConfig:
    """A2C hyper-parameters; defaults are the seed's Atari settings (MovingDot: entropy 0.02)."""

    n_envs: int = 16
    """Environments stepped side by side."""
    n_steps: int = 5
    """Steps of each env per update."""
    discount: float = 0.99
    """Discount factor γ of the n-step returns, in [0, 1]."""
    value_coef: float = 0.5
    """Weight of the value loss in the loss."""
    entropy_coef: float = 0.01
    """Weight of the policy's entropy bonus in the loss (MovingDot: 0.02)."""
    max_grad_norm: float = 0.5
    """Gradients clipped to this global norm."""
    lr: float = 7e-4
    """RMSProp learning rate."""
    rms_decay: float = 0.99
    """RMSProp's decay of the squared-gradient average."""
    rms_eps: float = 1e-5
    """RMSProp's ε."""

    def __post_init__(self) -> None:
        positive = ("n_envs", "n_steps", "lr", "max_grad_norm", "rms_eps")
        check_fields(self, {
            **{name: (getattr(self, name) > 0, "> 0") for name in positive},
            **{name: (0 <= getattr(self, name) <= 1, "a value in [0, 1]")
               for name in ("discount", "rms_decay")},
            **{name: (getattr(self, name) >= 0, ">= 0") for name in ("value_coef", "entropy_coef")},
        }, "A2CConfig.")  # fmt: skip


class FrameRollout(NamedTuple):
    """`n_steps` steps of `n_envs` envs: obs (T, N, *obs_shape) uint8; action, log_prob, value,
    reward, done (T, N); last_obs (N, *obs_shape), the observation after the rollout. `done`
    marks steps after which the episode ended (the next observation is a new episode's)."""

    obs: np.ndarray
    action: np.ndarray
    log_prob: np.ndarray
    value: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    last_obs: np.ndarray


class A2CState(struct.PyTreeNode):
    params: dict
    opt_state: optax.OptState
    step: jax.Array


class A2C:
    def __init__(self, config: A2CConfig, obs_shape: tuple[int, ...], n_actions: int):
        self.config, self.obs_shape, self.n_actions = config, tuple(obs_shape), n_actions
        self.net = FrameActorCritic(n_actions)
        self.tx = self.optimiser()
        self._grads = SummedGrads(self._rows_loss, FRAMES_PER_PASS)
        self._apply_grads = jit_step(self._apply, donate_argnums=0)
        self._prepare = jax.jit(self._returns)
        self.act = jax.jit(self._act, static_argnames="deterministic")
        self.value = jax.jit(lambda params, obs: self.net.apply(params, obs)[1])

    def optimiser(self) -> optax.GradientTransformation:
        cfg = self.config
        return optax.chain(
            optax.clip_by_global_norm(cfg.max_grad_norm),
            optax.rmsprop(cfg.lr, decay=cfg.rms_decay, eps=cfg.rms_eps),
        )

    def init(self, key: jax.Array) -> A2CState:
        params = self.net.init(key, jnp.zeros((1, *self.obs_shape), jnp.uint8))
        return A2CState(params, self.tx.init(params), jnp.zeros((), jnp.int32))

    def state_to_bytes(self, state: A2CState) -> bytes:
        return flax.serialization.to_bytes(jax.device_get(state))

    def state_from_bytes(self, data: bytes) -> A2CState:
        return state_from_bytes(self.init(jax.random.PRNGKey(0)), data)

    def _act(self, params, obs, key, step=0, deterministic: bool = False):
        """(actions, their log-probabilities, values) for a batch of observations: actions
        sampled from the policy (noise from `key` folded with `step`), or its most likely."""
        logits, value = self.net.apply(params, obs)
        key = jax.random.fold_in(key, step)
        action = jnp.argmax(logits, -1) if deterministic else jax.random.categorical(key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        return action, log_prob, value

    def _rows_loss(self, params, data, rows):
        """The loss on the rows `rows` of the flattened rollout (obs, action, return), and its
        parts (each a mean over those rows)."""
        cfg = self.config
        obs, action, returns = (x[rows] for x in data)
        logits, value = self.net.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        taken = jnp.take_along_axis(log_probs, action[:, None], -1)[:, 0]
        advantage = jax.lax.stop_gradient(returns - value)
        policy_loss = -(taken * advantage).mean()
        value_loss = ((returns - value) ** 2).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy,
                      "value_mean": value.mean()}  # fmt: skip

    def _returns(self, params, rollout: FrameRollout):
        """The rollout flattened to (n_envs x n_steps) rows: obs, action, n-step return."""
        bootstrap = self.net.apply(params, rollout.last_obs)[1]
        returns = nstep_returns(rollout.reward, rollout.done, bootstrap, self.config.discount)
        flat = lambda x: x.reshape(-1, *x.shape[2:])
        return flat(rollout.obs), flat(rollout.action), flat(returns)

    def _apply(self, state: A2CState, grads, lr_share=1.0):
        """The optimiser's step, its size times `lr_share` (an annealed learning rate; the
        update count is the caller's); the gradients' norm."""
        updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
        updates = jax.tree.map(lambda u: lr_share * u, updates)
        params = optax.apply_updates(state.params, updates)
        return state.replace(params=params, opt_state=opt_state), optax.tree.norm(grads)

    def update(self, state: A2CState, rollout: FrameRollout, key: jax.Array):
        """One gradient step on a rollout (`key` unused: A2C draws nothing)."""
        data = self._prepare(state.params, rollout)
        grads, metrics = self._grads(state.params, data, np.arange(len(data[0])))
        state, metrics["grad_norm"] = self._apply_grads(state, grads)
        return state.replace(step=state.step + 1), metrics


def nstep_returns(reward, done, bootstrap, discount: float):
    """R_t = r_t + discount * (1 - done_t) * R_{t+1}, from R_T = bootstrap: (T, N) arrays."""

    def backward(next_return, x):
        r, d = x
        ret = r + discount * (1.0 - d) * next_return
        return ret, ret

    return jax.lax.scan(backward, bootstrap, (reward, done), reverse=True)[1]


def bootstrap_truncated(
    agent: A2C, params, reward: np.ndarray, truncated: np.ndarray, final_obs: np.ndarray
) -> np.ndarray:
    """Rewards with `discount * V(final observation)` added where an episode was cut by a time
    limit (not ended by the task), so that the cut does not look like an end."""
    if not truncated.any():
        return reward
    value = np.asarray(agent.value(params, final_obs))  # (all envs: one compiled shape)
    return np.where(truncated, reward + agent.config.discount * value, reward).astype(reward.dtype)
