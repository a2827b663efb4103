"""How each agent acts, learns and keeps its transitions inside the online preference loop.

`SacSteps` (PEBBLE): random actions for the warm start, updates on the k-NN state-entropy reward
while pre-training, then on the learned reward, whose value for each new transition is computed
as it is stored (the buffer is relabelled after each fit). `PpoSteps` (PrefPPO): the rollout is
labelled by the current reward model once complete, just before its update.
"""

from __future__ import annotations

import jax
import numpy as np

from prefrl.agents import RolloutStorage
from prefrl.reward import RewardModel


def absorbing_value(
    model: RewardModel, obs: np.ndarray, action_dim: int, discount: float, horizon: int
) -> np.ndarray:
    """The learned reward of each final state held still (zero action) from the next step to the
    time limit: sum over k = 1..horizon of discount^k * r(obs, 0)."""
    weight = float(np.sum(discount ** np.arange(1, horizon + 1, dtype=np.float64)))
    return weight * model.predict(obs, np.zeros((len(obs), action_dim), np.float32))


class SacSteps:
    """PEBBLE's per-step work: act, update (intrinsic reward before the first fit), store."""

    def __init__(self, run):
        self.run = run
        self.batch_size = run.config.sac.batch_size * run.config.sac.utd_ratio
        self.metrics = None
        self.pending_reward = None  # this step's learned reward, dispatched before the update

    def act_and_update(self, obs):
        run, cfg = self.run, self.run.config
        step = run.step
        if step < cfg.warmstart_steps:
            return run.rng.uniform(-1.0, 1.0, run.env.action_dim).astype(np.float32)
        # Read once the update is queued behind it (see `prefrl.rl.learner`): drawing the batch
        # overlaps with the previous update, and the update starts right after the action.
        action = run.agent.act(run.state.actor_params, obs, run.key, step)
        if run.fitted:  # (queued after the update, it would wait for all of it in `store`)
            self.pending_reward = run.model.dispatch_step_reward(obs, action)
        learning = run.fitted or (cfg.unsupervised_steps and step < cfg.first_query_step)
        if learning and len(run.buffer) >= cfg.sac.batch_size and step % cfg.update_every == 0:
            batch = run.buffer.sample(run.rng, self.batch_size, cfg.recent_steps,
                                      self.hybrid_share())  # fmt: skip
            if not run.fitted:
                batch = batch._replace(reward=run.intrinsic(batch.next_obs, run.buffer, run.rng))
            run.state, self.metrics = run.agent.update(run.state, batch, run.key)
        return np.asarray(action)

    def hybrid_share(self) -> float:
        """The share of this batch from the newest steps (QPA's code: none once every label of
        the budget is asked, with `hybrid_replay_until_budget`)."""
        cfg = self.run.config
        if cfg.hybrid_replay_until_budget and self.run.requested >= cfg.schedule.budget:
            return 0.0
        return cfg.hybrid_replay

    def add_transition(self, obs, action, next_obs, terminated, truncated) -> None:
        run, pending, self.pending_reward = self.run, self.pending_reward, None
        if pending is not None:
            reward = pending()
        else:  # (fitted while acting at random: the warm start)
            reward = run.model.predict(obs[None], action[None]) if run.fitted else np.zeros(1)
        if terminated and run.fitted:
            run.add_end_values(reward, next_obs[None], [terminated])
        run.buffer.add(obs, action, float(reward[0]), next_obs, terminated)

    def after_fit(self, first: bool) -> None:
        """PEBBLE resets the critics once, when the agent switches from the intrinsic reward to
        the learned one (the buffer was relabelled by `take_fit`)."""
        run = self.run
        if first and run.config.unsupervised_steps:
            fresh = run.agent.init(jax.random.fold_in(run.key, 2))
            run.state = run.state.replace(
                critic_params=fresh.critic_params,
                target_critic_params=fresh.target_critic_params,
                critic_opt=fresh.critic_opt,
            )


class PpoSteps:
    """PrefPPO: roll out `rollout_steps`, label the rollout with the reward model, update.

    The replay buffer (capacity: one rollout) only serves as the reference set of recent states
    for the unsupervised k-NN reward; a partial rollout is not checkpointed (resume starts a new
    one)."""

    def __init__(self, run):
        self.run = run
        self.rollout = RolloutStorage(run.config.ppo.rollout_steps, run.env.obs_dim,
                                      run.env.action_dim)  # fmt: skip
        self.metrics = None
        self.raw_action = self.log_prob = None

    def act_and_update(self, obs):
        run = self.run
        action, self.raw_action, self.log_prob = run.agent.act(
            run.state.params, obs, run.key, run.step
        )
        return np.asarray(action)

    def add_transition(self, obs, action, next_obs, terminated, truncated) -> None:
        run, cfg, storage = self.run, self.run.config, self.rollout
        run.buffer.add(obs, action, 0.0, next_obs, terminated)
        storage.add(obs, action, np.asarray(self.raw_action), float(self.log_prob), next_obs,
                    terminated, truncated)  # fmt: skip
        if not storage.full:
            return
        if run.fitted:
            reward = run.model.predict(storage.obs, storage.action)
            run.add_end_values(reward, storage.next_obs, storage.terminated)
        elif cfg.unsupervised_steps and run.step + 1 >= cfg.warmstart_steps:
            reward = run.intrinsic(storage.next_obs, run.buffer, run.rng)
        else:
            storage.clear()
            return  # warm start: collect with the initial policy only
        run.state, self.metrics = run.agent.update(run.state, storage.rollout(reward), run.key)

    def after_fit(self, first: bool) -> None:
        """Nothing to do: each rollout is labelled with the latest model when it completes."""
