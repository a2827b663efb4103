"""The RL loops: one SAC or PPO run's state between steps (`RLRun`, saved in checkpoints) and
the loops that step it with one env."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np

from prefrl.agents import PPO, SAC, RolloutStorage
from prefrl.data import ReplayBuffer
from prefrl.data.demos import DemoSet, demo_buffer
from prefrl.envs import make_env
from prefrl.envs.pool import EnvPool, seeded
from prefrl.rl.config import RLConfig
from prefrl.rundir.checkpoints import (
    IncompatibleCheckpoint,
    begin_checkpoint,
    commit_checkpoint,
    write_json,
)
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.loop import (
    PeriodicTasks,
    TrainingLoop,
    stoppable,
    warn_if_no_updates,
)
from prefrl.training.policies import policy_action
from prefrl.training.result import TrainResult


class RLRun(TrainingLoop):
    """Everything a run needs between steps; saved in and restored from checkpoints (PPO: not
    a partly collected rollout, which a resumed run collects again)."""

    keeps_best = True

    def __init__(self, config: RLConfig, run_dir: Path, env=None, agent: SAC | PPO | None = None,
                 demos: DemoSet | None = None):  # fmt: skip
        """`env`, `agent`: objects a Python user passed (`RLLearner`); made from the config
        otherwise. `demos`: the --demos file's, loaded."""
        owns_env = env is None
        self.pool = None
        """SAC's --envs: env i of the pool has seed `seed + i`."""
        if config.envs > 1:
            if env is not None:
                raise TypeError(f"envs={config.envs} makes its envs from the config's env id; "
                                "give an id, not an env object")  # fmt: skip
            self.pool = EnvPool(seeded(make_env, config.env, config.seed), config.envs,
                                config.env_workers)  # fmt: skip
            # The loop's own env (sizes, evaluation set-up): env 0 with the envs here (the pool
            # closes it), a copy of it with workers.
            if self.pool.workers == 0:
                env, owns_env = self.pool.envs[0], False
        env = env if env is not None else make_env(config.env, seed=config.seed)
        super().__init__(config, run_dir, env, owns_env=owns_env)
        dims = (self.env.obs_dim, self.env.action_dim)
        if agent is None:
            agent = SAC(config.sac, *dims) if config.algo == "sac" else PPO(config.ppo, *dims)
        self.agent = agent
        # rbg keys: one RngBitGenerator op per draw (2-3% faster on the CPU; design.md).
        self.key = jax.random.key(config.seed, impl="rbg")
        self.rng = np.random.default_rng(config.seed)
        self.state = self.agent.init(jax.random.fold_in(self.key, 1))
        self.buffer = ReplayBuffer(config.buffer_size, *dims) if config.algo == "sac" else None
        self.demos = None if demos is None else demo_buffer(demos, "rewards")
        """The offline half of every batch (--demos)."""
        self.episodes = 0

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        self.check_savable(self.state)
        tmp = begin_checkpoint(self.run_dir, self.step)
        self.write_policy(tmp)  # (the agent and the config)
        if self.buffer is not None:
            self.buffer.save(tmp / "buffer.npz")
        write_json(
            tmp / "loop.json",
            {
                "step": self.step,
                "episodes": self.episodes,
                "last_eval": self.last_eval,
                "rng": self.rng.bit_generator.state,
            },
        )
        return commit_checkpoint(tmp, keep=self.config.keep_checkpoints)

    def restore(self, ckpt: Path) -> None:
        self.state = self.agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        if self.buffer is not None:
            self._restore_buffer(ckpt)
        loop = json.loads((ckpt / "loop.json").read_text())
        self.step, self.episodes, self.last_eval = loop["step"], loop["episodes"], loop["last_eval"]
        self.rng.bit_generator.state = loop["rng"]

    def _restore_buffer(self, ckpt: Path) -> None:
        self.buffer = ReplayBuffer.load(ckpt / "buffer.npz")
        if self.buffer.capacity != self.config.buffer_size:
            raise IncompatibleCheckpoint(
                f"--buffer-size={self.config.buffer_size} differs from the checkpoint's "
                f"{self.buffer.capacity}; resume with the run's own buffer size"
            )

    def policy(self, obs: np.ndarray) -> np.ndarray:
        return policy_action(self.agent, self.state, obs, self.key, deterministic=True)

    def close(self) -> None:
        super().close()
        if self.pool is not None:
            self.pool.close()


class EpisodeLog:
    """The running episode's return and length, logged (train/episode_*) when it ends."""

    def __init__(self, loop: RLRun, metrics: MetricsLogger):
        self.loop, self.metrics = loop, metrics
        self.ret, self.length = 0.0, 0

    def add(self, step: int, reward: float, ended: bool) -> None:
        self.ret += reward
        self.length += 1
        if ended:
            self.loop.episodes += 1
            self.metrics.log(step + 1, {"train/episode_return": self.ret,
                                        "train/episode_length": self.length})  # fmt: skip
            self.ret, self.length = 0.0, 0


def periodic_work(loop: RLRun, metrics: MetricsLogger) -> tuple[TrainingProgress, PeriodicTasks]:
    """The progress display and the periodic work (logging, evaluation, checkpoints)."""
    cfg = loop.config
    progress = TrainingProgress(
        cfg.steps, loop.step, enabled=cfg.progress, last_eval=loop.last_eval
    )
    if cfg.algo == "sac":  # (PPO has no warm start)
        warn_if_no_updates(progress, loop.step, cfg.warmstart_steps, cfg.steps)
    title = f"{cfg.algo.upper()} on {cfg.env}"
    return progress, PeriodicTasks(loop, metrics, progress, title)


def rl_result(loop: RLRun, periodic: PeriodicTasks, interrupted: bool) -> TrainResult:
    """What an RL run returns."""
    return TrainResult(loop.run_dir, loop.step, periodic.final, interrupted, video=periodic.video,
                       best_eval=periodic.best.best, title=periodic.title)  # fmt: skip


def _start(loop: RLRun, metrics: MetricsLogger):
    """What both one-env loops begin with: the first observation, the episode log, the progress
    display and the periodic work."""
    obs, _ = loop.env.reset(seed=loop.config.seed + loop.step)
    return obs, EpisodeLog(loop, metrics), *periodic_work(loop, metrics)


def run_sac(loop: RLRun, metrics: MetricsLogger) -> TrainResult:
    cfg, sac, env, buffer = loop.config, loop.agent, loop.env, loop.buffer
    agent_cfg = cfg.sac
    batch_size = agent_cfg.batch_size * agent_cfg.utd_ratio
    act, update, key, rng = sac.act, sac.update, loop.key, loop.rng
    update_metrics = None
    batch = None  # the next update's batch, drawn while the previous update runs

    def learning(step: int) -> bool:
        """Whether step `step` begins with an update."""
        return (step >= cfg.warmstart_steps and len(buffer) >= agent_cfg.batch_size
                and step % cfg.update_every == 0)  # fmt: skip

    obs, episode, progress, periodic = _start(loop, metrics)
    with stoppable(loop, progress) as stop:
        while loop.step < cfg.steps and not stop.requested:
            step = loop.step
            if step < cfg.warmstart_steps:
                action = rng.uniform(-1.0, 1.0, env.action_dim).astype(np.float32)
            else:  # read below, once the update is queued behind it
                action = act(loop.state.actor_params, obs, key, step)
            # Update dispatched before the action is read: the env step overlaps it (design.md).
            if learning(step):
                if batch is None:  # the first update, or the first after a resume
                    batch = buffer.sample_beside(loop.demos, rng, batch_size)
                loop.state, update_metrics = update(loop.state, batch, key)
            action = np.asarray(action)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            buffer.add(obs, action, reward, next_obs, terminated)
            episode.add(step, reward, terminated or truncated)
            obs = env.reset()[0] if terminated or truncated else next_obs
            loop.step = step + 1
            periodic.after_step(loop.step, update_metrics)
            # Drawn after a checkpoint saved the generator, so a resumed run draws it too.
            more = learning(loop.step) and loop.step < cfg.steps and not stop.requested
            batch = buffer.sample_beside(loop.demos, rng, batch_size) if more else None
    return rl_result(loop, periodic, stop.requested)


def run_ppo(loop: RLRun, metrics: MetricsLogger) -> TrainResult:
    """PPO: collect `rollout_steps` transitions with the current policy, then one update."""
    cfg, ppo, env = loop.config, loop.agent, loop.env
    storage = RolloutStorage(cfg.ppo.rollout_steps, env.obs_dim, env.action_dim)
    rewards = np.zeros(cfg.ppo.rollout_steps, np.float32)
    update_metrics = None
    obs, episode, progress, periodic = _start(loop, metrics)
    with stoppable(loop, progress) as stop:
        while loop.step < cfg.steps and not stop.requested:
            action, raw, log_prob = ppo.act(loop.state.params, obs, loop.key, loop.step)
            action = np.asarray(action)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            rewards[storage.t] = reward
            storage.add(obs, action, np.asarray(raw), float(log_prob), next_obs, terminated,
                        truncated)  # fmt: skip
            if storage.full:
                loop.state, update_metrics = ppo.update(loop.state, storage.rollout(rewards),
                                                        loop.key)  # fmt: skip
            episode.add(loop.step, reward, terminated or truncated)
            obs = env.reset()[0] if terminated or truncated else next_obs
            loop.step += 1
            periodic.after_step(loop.step, update_metrics)
    return rl_result(loop, periodic, stop.requested)
