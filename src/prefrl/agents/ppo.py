"""Proximal Policy Optimization (Schulman et al. 2017), the on-policy agent of PrefPPO.

`update(state, rollout, key)` does everything for one rollout inside one jitted call: values,
GAE, advantage normalisation, then `epochs` passes of shuffled minibatches (nested `lax.scan`).
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
from prefrl.nn import GaussianActor, ValueNet, gaussian_log_prob
from prefrl.rundir.config import check_fields
from prefrl.rundir.pytree import state_from_bytes
from prefrl.xla import jit_step


@document_fields
@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters; defaults are the PPO paper's MuJoCo settings."""

    hidden_dims: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the Gaussian actor and of the value network."""
    lr: float = 3e-4
    """Adam learning rate of both networks (eps 1e-5)."""
    rollout_steps: int = 2048
    """Env steps per update."""
    minibatch_size: int = 64
    """Transitions per gradient step; rollout_steps must be a multiple of it."""
    epochs: int = 10
    """Passes over each rollout, in shuffled minibatches."""
    discount: float = 0.99
    """Discount factor γ, in [0, 1]."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation, in [0, 1]."""
    clip: float = 0.2
    """The surrogate's probability-ratio clip ε (ratios kept within 1 ± ε)."""
    entropy_coef: float = 0.0
    """Weight of the policy's entropy bonus in the loss."""
    value_coef: float = 0.5
    """Weight of the value loss in the loss."""
    max_grad_norm: float = 0.5
    """Gradients clipped to this global norm."""
    init_log_std: float = 0.0
    """The actor's log standard deviation at the start (a learned, state-independent parameter)."""
    normalize_obs: bool = False
    """Feed both networks each observation less the running mean, over the running std, of every
    observation of the rollouts so far, clipped to +-10 (Baselines' VecNormalize of its MuJoCo
    PPO): velocities of several units then weigh no more than angles. The statistics are kept
    in the params (`params["obs_norm"]`, saved with them) and move only between updates, after
    each, so a rollout is scored under the statistics it was acted under."""

    lr_anneal_steps: int = 0
    """Env steps over which the learning rate falls linearly to 0, from the first update (set it
    to the run's steps for Baselines' MuJoCo PPO, whose rate falls to 0 over the run); 0 keeps
    it constant. A rate that stays high can undo, late in a run, what the policy learned."""

    def __post_init__(self) -> None:
        positive = ("lr", "rollout_steps", "minibatch_size", "epochs", "clip", "max_grad_norm")
        check_fields(self, {name: (getattr(self, name) > 0, "> 0") for name in positive},
                     "PPOConfig.")  # fmt: skip
        check_fields(self, {
            "rollout_steps": (self.rollout_steps % self.minibatch_size == 0,
                              f"a multiple of minibatch_size ({self.minibatch_size})"),
            **{name: (0 <= getattr(self, name) <= 1, "a value in [0, 1]")
               for name in ("discount", "gae_lambda")},
            "lr_anneal_steps": (self.lr_anneal_steps == 0
                                or self.lr_anneal_steps >= self.rollout_steps,
                                f"0 (constant) or at least rollout_steps ({self.rollout_steps})"),
        }, "PPOConfig.")  # fmt: skip


class Rollout(NamedTuple):
    """`rollout_steps` consecutive transitions; `done` = terminated or truncated (episode end)."""

    obs: np.ndarray
    action: np.ndarray  # unclipped Gaussian samples
    log_prob: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    done: np.ndarray


class RolloutStorage:
    """Collects one rollout step by step; `full` once it holds `rollout_steps` transitions.

    `action` is what the env (and a reward model) saw, clipped to [-1, 1]; `raw_action` the
    Gaussian sample PPO's log-probabilities are of. The reward is given when the rollout is
    complete (`rollout(reward)`), so a learned reward can label all of it at once."""

    def __init__(self, steps: int, obs_dim: int, action_dim: int):
        self.steps = steps
        self.obs = np.zeros((steps, obs_dim), np.float32)
        self.next_obs = np.zeros((steps, obs_dim), np.float32)
        self.action = np.zeros((steps, action_dim), np.float32)
        self.raw_action = np.zeros((steps, action_dim), np.float32)
        self.log_prob = np.zeros(steps, np.float32)
        self.terminated = np.zeros(steps, np.float32)
        self.done = np.zeros(steps, np.float32)
        self.t = 0

    @property
    def full(self) -> bool:
        return self.t == self.steps

    def add(self, obs, action, raw_action, log_prob, next_obs, terminated, truncated) -> None:
        t = self.t
        self.obs[t], self.action[t], self.next_obs[t] = obs, action, next_obs
        self.raw_action[t], self.log_prob[t] = raw_action, log_prob
        self.terminated[t], self.done[t] = float(terminated), float(terminated or truncated)
        self.t = t + 1

    def clear(self) -> None:
        self.t = 0

    def rollout(self, reward: np.ndarray) -> Rollout:
        """The complete rollout with its rewards; storage starts the next one."""
        self.clear()
        return Rollout(self.obs, self.raw_action, self.log_prob, reward.astype(np.float32),
                       self.next_obs, self.terminated, self.done)  # fmt: skip


class PPOState(struct.PyTreeNode):
    params: dict
    opt_state: optax.OptState
    step: jax.Array


class PPO:
    """PPO with a Gaussian policy on state vectors: builds the networks and the optimiser for
    given spaces and holds no mutable state itself (`init(key)` makes the state that `act` and
    `update` take and return). Pass one to `PreferenceLearner(agent=...)` for PrefPPO."""

    def __init__(self, config: PPOConfig, obs_dim: int, action_dim: int):
        self.config = config
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.actor = GaussianActor(action_dim, config.hidden_dims, config.init_log_std)
        self.value = ValueNet(config.hidden_dims)
        lr = config.lr
        if config.lr_anneal_steps:  # counted in gradient steps: epochs x minibatches an update
            grad_steps = (config.lr_anneal_steps // config.rollout_steps * config.epochs
                          * (config.rollout_steps // config.minibatch_size))  # fmt: skip
            lr = optax.linear_schedule(config.lr, 0.0, grad_steps)
        self.tx = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr, eps=1e-5)
        )
        self.update = jit_step(self._update, donate_argnums=0)
        self.act = jax.jit(self._act, static_argnames="deterministic")

    def init(self, key: jax.Array) -> PPOState:
        k1, k2 = jax.random.split(key)
        obs = jnp.zeros((1, self.obs_dim), jnp.float32)
        params = {"actor": self.actor.init(k1, obs), "value": self.value.init(k2, obs)}
        opt_state = self.tx.init(params)  # (the statistics below are not trained)
        if self.config.normalize_obs:
            params["obs_norm"] = {"mean": jnp.zeros(self.obs_dim), "var": jnp.ones(self.obs_dim),
                                  "count": jnp.zeros(())}  # fmt: skip
        return PPOState(params, opt_state, jnp.zeros((), jnp.int32))

    def state_to_bytes(self, state: PPOState) -> bytes:
        return flax.serialization.to_bytes(jax.device_get(state))

    def state_from_bytes(self, data: bytes) -> PPOState:
        return state_from_bytes(self.init(jax.random.PRNGKey(0)), data)

    @staticmethod
    def _inputs(params, obs):
        """The networks' view of `obs`: as it is, or normalised (`normalize_obs`)."""
        if "obs_norm" not in params:
            return obs
        norm = params["obs_norm"]
        return jnp.clip((obs - norm["mean"]) / jnp.sqrt(norm["var"] + 1e-8), -10.0, 10.0)

    def _act(self, params, obs, key, step, deterministic: bool = False):
        """(action in [-1, 1] for the env, raw sample, its log-prob)."""
        mean, log_std = self.actor.apply(params["actor"], self._inputs(params, obs))
        if deterministic:
            return jnp.clip(mean, -1, 1), mean, gaussian_log_prob(mean, log_std, mean)
        noise = jax.random.normal(jax.random.fold_in(key, step), mean.shape)
        raw = mean + jnp.exp(log_std) * noise
        return jnp.clip(raw, -1, 1), raw, gaussian_log_prob(mean, log_std, raw)

    def _advantages(self, params, rollout: Rollout):
        cfg = self.config
        values = self.value.apply(params["value"], self._inputs(params, rollout.obs))
        next_values = self.value.apply(params["value"], self._inputs(params, rollout.next_obs))
        # Truncated episodes bootstrap from V(next_obs); only true terminals do not.
        deltas = rollout.reward + cfg.discount * (1 - rollout.terminated) * next_values - values

        def backward(carry, x):
            delta, done = x
            adv = delta + cfg.discount * cfg.gae_lambda * (1 - done) * carry
            return adv, adv

        _, adv = jax.lax.scan(backward, 0.0, (deltas, rollout.done), reverse=True)
        return adv, adv + values

    def _loss(self, trained, frozen, mb):
        cfg = self.config
        params = {**trained, **frozen}
        obs, action, old_log_prob, adv, ret = mb
        obs = self._inputs(params, obs)
        mean, log_std = self.actor.apply(params["actor"], obs)
        log_prob = gaussian_log_prob(mean, log_std, action)
        ratio = jnp.exp(log_prob - old_log_prob)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv).mean()
        v_loss = ((self.value.apply(params["value"], obs) - ret) ** 2).mean()
        entropy = (log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e)).sum(-1).mean()
        loss = pg + cfg.value_coef * v_loss - cfg.entropy_coef * entropy
        clip_frac = (jnp.abs(ratio - 1) > cfg.clip).mean()
        return loss, {
            "policy_loss": pg,
            "value_loss": v_loss,
            "entropy": entropy,
            "clip_fraction": clip_frac,
        }

    def _update(self, state: PPOState, rollout: Rollout, key: jax.Array):
        cfg = self.config
        key = jax.random.fold_in(key, state.step)
        adv, ret = self._advantages(state.params, rollout)
        data = (rollout.obs, rollout.action, rollout.log_prob, adv, ret)
        n_mb = cfg.rollout_steps // cfg.minibatch_size
        trained = {k: state.params[k] for k in ("actor", "value")}
        frozen = {k: v for k, v in state.params.items() if k not in trained}

        def epoch(carry, k):
            perm = jax.random.permutation(k, cfg.rollout_steps).reshape(n_mb, cfg.minibatch_size)

            def minibatch(carry, idx):
                trained, opt_state = carry
                mb = jax.tree.map(lambda x: x[idx], data)
                (_, metrics), grads = jax.value_and_grad(self._loss, has_aux=True)(
                    trained, frozen, mb
                )
                updates, opt_state = self.tx.update(grads, opt_state, trained)
                return (optax.apply_updates(trained, updates), opt_state), metrics

            return jax.lax.scan(minibatch, carry, perm)

        (trained, opt_state), metrics = jax.lax.scan(
            epoch, (trained, state.opt_state), jax.random.split(key, cfg.epochs)
        )
        metrics = jax.tree.map(jnp.mean, metrics)
        metrics["value_mean"] = ret.mean()
        params = {**trained, **frozen}
        if "obs_norm" in params:
            params["obs_norm"] = _merged_moments(params["obs_norm"], rollout.obs)
        return PPOState(params, opt_state, state.step + 1), metrics


def _merged_moments(norm: dict, obs: jax.Array) -> dict:
    """Running mean and variance of every observation so far, `obs` added (Chan et al.'s
    parallel update)."""
    n, mean, var = obs.shape[0], obs.mean(0), obs.var(0)
    total = norm["count"] + n
    delta = mean - norm["mean"]
    m2 = norm["var"] * norm["count"] + var * n + delta**2 * norm["count"] * n / total
    return {"mean": norm["mean"] + delta * n / total, "var": m2 / total, "count": total}
