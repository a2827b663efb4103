"""PPO on stacked frames with discrete actions (Schulman et al. 2017, its Atari settings): a
Nature-CNN actor-critic, rollouts of `n_steps` steps of `n_envs` envs, GAE, `epochs` passes of
shuffled minibatches with the clipped surrogate.

Same rollout interface as A2C (`prefrl.agents.a2c`): the loop records each step's action, its
log-probability and value, and passes the rollout to `update`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax

from prefrl.agents.a2c import A2C, A2CState, FrameRollout
from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields


@document_fields
@dataclasses.dataclass(frozen=True)
class FramePPOConfig:
    """Defaults: the PPO paper's Atari settings as OpenAI Baselines' ppo2 runs them (8 envs x
    128 steps, 4 epochs of 4 minibatches, clip 0.1, Adam 2.5e-4), at a constant learning rate
    and clip (the paper anneals both linearly to 0 over the run: `anneal`)."""

    n_envs: int = 8
    """Environments stepped side by side."""
    n_steps: int = 128
    """Steps of each env per rollout (a rollout is n_envs x n_steps agent steps)."""
    epochs: int = 4
    """Passes over each rollout."""
    minibatches: int = 4
    """Minibatches per pass; must divide n_envs x n_steps."""
    discount: float = 0.99
    """Discount factor γ, in [0, 1]."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation, in [0, 1]."""
    clip: float = 0.1
    """The surrogate's probability-ratio clip ε."""
    value_coef: float = 0.5
    """Weight of the value loss in the loss."""
    entropy_coef: float = 0.01
    """Weight of the policy's entropy bonus in the loss."""
    max_grad_norm: float = 0.5
    """Gradients clipped to this global norm."""
    lr: float = 2.5e-4
    """Adam learning rate (eps 1e-5)."""
    anneal: bool = False
    """The learning rate and the clip fall linearly towards 0 over the run's updates, as in the
    PPO paper's Atari runs (the run's --steps sets how many there are)."""

    def __post_init__(self) -> None:
        positive = ("n_envs", "n_steps", "epochs", "minibatches", "clip", "max_grad_norm", "lr")
        check_fields(self, {
            **{name: (getattr(self, name) > 0, "> 0") for name in positive},
            "minibatches": ((self.n_envs * self.n_steps) % self.minibatches == 0,
                            f"a divisor of n_envs x n_steps ({self.n_envs * self.n_steps})"),
            **{name: (0 <= getattr(self, name) <= 1, "a value in [0, 1]")
               for name in ("discount", "gae_lambda")},
        }, "FramePPOConfig.")  # fmt: skip


def gae(reward, done, value, last_value, discount: float, lam: float):
    """Generalised advantage estimates and returns for (T, N) rollouts."""
    next_values = jnp.concatenate([value[1:], last_value[None]])

    def backward(carry, x):
        r, d, v, nv = x
        delta = r + discount * (1.0 - d) * nv - v
        adv = delta + discount * lam * (1.0 - d) * carry
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(last_value),
                          (reward, done, value, next_values), reverse=True)  # fmt: skip
    return adv, adv + value


class FramePPO(A2C):
    """Shares A2C's network, acting and checkpoints; only the update differs."""

    def optimiser(self) -> optax.GradientTransformation:
        cfg = self.config
        return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm),
                           optax.adam(cfg.lr, eps=1e-5))  # fmt: skip

    def _rows_loss(self, params, data, rows, adv_mean, adv_std, clip):
        """The clipped surrogate (ratios clipped to 1 ± `clip`) on the rows `rows` of the
        flattened rollout (obs, action, log-prob, advantage, return), advantages normalised by
        their minibatch's mean and std; its parts, each a mean over those rows."""
        cfg = self.config
        obs, action, old_log_prob, adv, ret = (x[rows] for x in data)
        logits, value = self.net.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, action[:, None], -1)[:, 0]
        ratio = jnp.exp(log_prob - old_log_prob)
        adv = (adv - adv_mean) / (adv_std + 1e-8)
        clipped = jnp.clip(ratio, 1 - clip, 1 + clip)
        policy_loss = -jnp.minimum(ratio * adv, clipped * adv).mean()
        value_loss = ((value - ret) ** 2).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy,
                      "clip_fraction": (jnp.abs(ratio - 1) > clip).mean()}  # fmt: skip

    def __init__(self, config: FramePPOConfig, obs_shape: tuple[int, ...], n_actions: int,
                 total_updates: int | None = None):  # fmt: skip
        """`total_updates`: the run's updates, which `config.anneal` spreads the fall over."""
        if config.anneal and not total_updates:
            raise ValueError(
                f"FramePPOConfig.anneal needs the run's number of updates, got total_updates="
                f"{total_updates!r}: the loop passes steps // (n_envs x n_steps)"
            )
        super().__init__(config, obs_shape, n_actions)
        self.total_updates = total_updates
        # The epochs and minibatches are driven from Python (inside a lax.scan, XLA:CPU ran
        # the convolutions' gradients 10x slower: 44 s against 3.8 s an update of 8 x 128
        # steps, 4 epochs of 4 minibatches), each minibatch's gradients in chunks of frames
        # (A2C's `SummedGrads`), then one optimiser step (A2C's `_apply`).
        self._prepare = jax.jit(self._advantages)
        self._adv_stats = jax.jit(lambda adv, rows: (adv[rows].mean(), adv[rows].std()))

    def _advantages(self, params, rollout: FrameRollout):
        """The rollout flattened to (n_envs x n_steps) rows: obs, action, log-prob, GAE
        advantage, return."""
        cfg = self.config
        last_value = self.net.apply(params, rollout.last_obs)[1]
        adv, ret = gae(rollout.reward, rollout.done, rollout.value, last_value,
                       cfg.discount, cfg.gae_lambda)  # fmt: skip
        flat = lambda x: x.reshape(-1, *x.shape[2:])
        return tuple(map(flat, (rollout.obs, rollout.action, rollout.log_prob, adv, ret)))

    def remaining(self, step: int) -> float:
        """The share of the learning rate and clip that update `step` (from 0) uses: 1 without
        annealing, else 1 - step / total_updates (never below 0)."""
        if not self.config.anneal:
            return 1.0
        return max(0.0, 1.0 - step / self.total_updates)

    def update(self, state: A2CState, rollout: FrameRollout, key: jax.Array):
        """`epochs` passes over the rollout in `minibatches` shuffled minibatches."""
        cfg = self.config
        share = np.float32(self.remaining(int(state.step)))
        clip = np.float32(cfg.clip) * share
        data = self._prepare(state.params, rollout)
        size = cfg.n_envs * cfg.n_steps
        metrics = []
        for k in jax.random.split(jax.random.fold_in(key, state.step), cfg.epochs):
            for rows in np.asarray(jax.random.permutation(k, size)).reshape(cfg.minibatches, -1):
                stats = self._adv_stats(data[3], rows)
                grads, m = self._grads(state.params, data, rows, *stats, clip)
                state = self._apply_grads(state, grads, share)[0]
                metrics.append(m)
        metrics = jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *metrics)
        metrics["value_mean"] = data[4].mean()
        return state.replace(step=state.step + 1), metrics
