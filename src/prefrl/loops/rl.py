"""RL on the environment's own reward (SAC, or PPO): the baseline every preference workflow is
measured against."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import jax
import numpy as np

from prefrl.agents import PPO, SAC, PPOConfig, RolloutStorage, SACConfig
from prefrl.agents.a2c import A2CConfig
from prefrl.agents.frame_ppo import FramePPOConfig
from prefrl.data import ReplayBuffer
from prefrl.data.demos import DemoSet, demo_buffer, load_demos_of
from prefrl.envs import make_env
from prefrl.envs.pool import EnvPool, seeded
from prefrl.envs.registry import is_pixel_env, resolve
from prefrl.fielddocs import document_fields
from prefrl.loops.common import (
    PeriodicTasks,
    TrainingLoop,
    check_resumed_identity,
    check_sizes,
    config_with,
    env_argument,
    python_arguments,
    run_name,
    start_run,
    stoppable,
    warn_if_no_updates,
)
from prefrl.loops.evaluate import EvalResult
from prefrl.loops.policies import policy_action
from prefrl.rundir.checkpoints import (
    IncompatibleCheckpoint,
    begin_checkpoint,
    commit_checkpoint,
    write_json,
)
from prefrl.rundir.config import check_fields, config_to_dict
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress

ALGOS = ("sac", "ppo")
FRAME_ALGOS = ("a2c", "ppo")  # (agents on frames: movingdot, atari:*)


@document_fields
@dataclass(frozen=True)
class RLConfig:
    """Train SAC (or PPO) on an environment's true reward."""

    env: str = "HalfCheetah-v5"
    """Environment id: a Gymnasium id (Hopper-v5), dmc:domain-task, toy:point-reach, your
    registered Gymnasium env as module:EnvId (`prefrl envs` lists the ids), or an env of frames
    for --algo a2c: movingdot, atari:Pong (prefrl[atari])."""
    steps: int = 1_000_000
    """Environment steps in total (RoboPianist's max-steps)."""
    seed: int = 0
    """Random seed: the networks, the env's resets, the actions sampled."""
    algo: str = "sac"
    """sac (off-policy, a replay buffer) or ppo (on-policy: an update per --ppo.rollout-steps);
    a2c or ppo for envs of frames (an update per --a2c.n-envs x --a2c.n-steps, or
    --ppo-frames.n-envs x --ppo-frames.n-steps)."""
    warmstart_steps: int = 10_000
    """SAC: uniform-random actions for this many steps; learning starts after them (PPO learns
    from its first rollout)."""
    update_every: int = 1
    """SAC: an update (of --sac.utd-ratio critic steps) every this many env steps: 2 is an
    update-to-data ratio of 0.5."""
    demos: Path | None = None
    """SAC: a demo file (`prefrl demos ...`, of this env) whose transitions, with the rewards
    the env gave them, fill half of every batch (RLPD's symmetric sampling)."""
    eval_interval: int = 10_000
    """Evaluate (deterministic policy) every this many steps, and at the end."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    video: bool = True
    """Write evaluation videos (H.264 mp4) to the run's videos/ folder."""
    video_interval: int = 100_000
    """Record the first evaluation episode every this many steps (and at the end)."""
    render_size: int = 256
    """Evaluation videos' size in pixels: square renders of state envs; for envs of frames,
    the least height (each pixel of the game a block, by a whole factor: 256 gives Atari's
    210x160 screen at 420x320)."""
    checkpoint_interval: int = 50_000
    """Checkpoint (agent, replay buffer, loop state) every this many steps, and at the end."""
    keep_checkpoints: int = 3
    """Checkpoints kept (the newest); 0 keeps all, e.g. to pick a `medium` policy for a dataset
    (`prefrl dataset collect`) from a run's history."""
    log_interval: int = 1_000
    """Write training metrics (metrics.jsonl, TensorBoard) every this many env steps."""
    buffer_size: int = 1_000_000
    """SAC: transitions the replay buffer keeps (the oldest are dropped)."""
    name: str | None = None
    """Run directory name under runs-dir (default: env, algorithm, seed and time)."""
    runs_dir: Path = Path("runs")
    """The folder run directories are made in."""
    resume: Path | None = None
    """Continue the run in this directory from its latest checkpoint (other flags given on the
    command line override its stored config, e.g. --steps to extend it)."""
    progress: bool = True
    """Show a progress bar."""
    sac: SACConfig = dataclasses.field(default_factory=SACConfig)
    """SAC's settings (--algo sac)."""
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    """PPO's settings on state vectors (--algo ppo)."""
    a2c: A2CConfig = dataclasses.field(default_factory=A2CConfig)
    """A2C's settings on envs of frames (--algo a2c)."""
    ppo_frames: FramePPOConfig = dataclasses.field(default_factory=FramePPOConfig)
    """PPO on frames (--algo ppo with a pixel env; --ppo.* is PPO on state vectors)."""
    envs: int = 1
    """SAC on states: envs stepped together, each with its own episode; the policy acts for all
    of them at once, and --update-every counts all their steps. (Envs of frames: --a2c.n-envs,
    --ppo-frames.n-envs.)"""
    env_workers: int = 0
    """Processes the envs are stepped in (0: this process): the agent's envs of frames, or
    SAC's --envs."""
    RENAMED: ClassVar[dict[str, str]] = {"agent": "sac"}  # (config.json of older runs)

    def __post_init__(self) -> None:
        pixels = is_pixel_env(self.env)
        if pixels:
            accepted = f"one of {', '.join(FRAME_ALGOS)} for {self.env}, an env of frames"
            check_fields(self, {"algo": (self.algo in FRAME_ALGOS, accepted)}, "--")
        else:
            resolve(self.env)  # unknown ids fail here, with the closest matches
            accepted = f"one of {', '.join(ALGOS)} for {self.env} (a2c is for envs of frames)"
            check_fields(self, {"algo": (self.algo in ALGOS, accepted)}, "--")
        positive = ("steps", "eval_interval", "eval_episodes", "checkpoint_interval",
                    "log_interval", "buffer_size", "render_size")  # fmt: skip
        check_fields(self, {
            **{name: (getattr(self, name) > 0, "a positive integer") for name in positive},
            "keep_checkpoints": (self.keep_checkpoints >= 0, "0 (keep all) or a positive integer"),
            "warmstart_steps": (self.warmstart_steps >= 0, ">= 0"),
            "update_every": (self.update_every >= 1, "a positive integer"),
            "demos": (self.demos is None or self.algo == "sac",
                      "no demos with --algo ppo: they fill half of SAC's batches (--algo sac)"),
            "envs": (self.envs == 1 or (self.envs > 1 and self.algo == "sac" and not pixels),
                     ("1, or more for SAC on states (envs of frames: --a2c.n-envs or "
                      "--ppo-frames.n-envs; PPO on states steps one env)")),
            "env_workers": (self.env_workers >= 0 and (pixels or self.envs > 1
                                                       or self.env_workers == 0),
                            ">= 0" if pixels or self.envs > 1 else
                            f"0 for one env of states ({self.env}): worker processes step "
                            "several, with --envs N"),
        }, "--")  # fmt: skip
        rollout = (self.ppo_frames.n_envs * self.ppo_frames.n_steps if pixels
                   else self.ppo.rollout_steps)  # fmt: skip
        check_fields(self, {"steps": (
            self.algo != "ppo" or self.steps >= rollout,
            (f"at least one PPO rollout ({rollout} steps: --ppo.rollout-steps, or for frames "
            "--ppo-frames.n-envs x --ppo-frames.n-steps), or PPO never updates"),
        )}, "--")  # fmt: skip


def load_rl_demos(config: RLConfig, env=None) -> DemoSet | None:
    """The --demos file, checked against the env before any run directory exists."""
    if config.demos is None:
        return None
    probe = env if env is not None else make_env(config.env, seed=0)
    try:
        demos = load_demos_of(config.demos, config.env, probe)
    finally:
        if env is None:
            probe.close()
    if not demos.has_actions:
        raise ValueError(f"{config.demos} holds states without actions: --demos fills SAC's "
                         "batches with demo transitions, which need the actions")  # fmt: skip
    return demos


@dataclass
class RLResult:
    """What `train_rl` (and `RLLearner.train`) returns: the run directory, the last step, the
    final evaluation, its video, and whether the run was stopped early (Ctrl-C)."""

    run_dir: Path
    """The run directory (`load_policy(run_dir)` gives its policy back)."""
    step: int
    """The last env step reached."""
    final_eval: EvalResult | None = dataclasses.field(repr=False)
    """The last evaluation: `returns`, `lengths` and, on tasks with one, `success` per episode
    (None: the run stopped before its agent trained)."""
    video: Path | None
    """The last evaluation's video, where one was recorded."""
    interrupted: bool = False
    """Stopped (Ctrl-C, SIGTERM) before its last step; `--resume` goes on from there."""


class RLRun(TrainingLoop):
    """Everything a run needs between steps; saved in and restored from checkpoints (PPO: not
    a partly collected rollout, which a resumed run collects again)."""

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
        (tmp / "agent.msgpack").write_bytes(self.agent.state_to_bytes(self.state))
        if self.buffer is not None:
            self.buffer.save(tmp / "buffer.npz")
        write_json(tmp / "config.json", config_to_dict(self.config))
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


class RLLearner:
    """SAC or PPO on an environment's own reward, from objects:

        result = RLLearner("Hopper-v5", steps=300_000).train()
        result = RLLearner(gymnasium.make("Pendulum-v1"), agent=PPO(PPOConfig(), 3, 1)).train()

    Args:
        env: an env id (`prefrl envs`), an env made by `prefrl.make_env`, or one made by
            `gymnasium.make` (yours to close).
        agent: a `SAC` or a `PPO` (its settings are recorded in the run's config); default:
            SAC with `config.sac`.
        config: every other setting (`RLConfig`); keyword arguments override its fields, e.g.
            `steps=100_000, runs_dir="runs"`.
    """

    @python_arguments(RLConfig)
    def __init__(self, env: str | gym.Env | None = None, *, agent: SAC | PPO | None = None,
                 config: RLConfig | None = None, **settings):  # fmt: skip
        self.env, env_id = env_argument(env)
        given = {} if env_id is None else {"env": env_id}
        if agent is not None:
            if not isinstance(agent, SAC | PPO):
                raise TypeError(f"agent={agent!r} is not a prefrl SAC or PPO")
            algo = "sac" if isinstance(agent, SAC) else "ppo"
            given.update({"algo": algo, algo: agent.config})
        self.config = config_with(RLConfig, "RLLearner", config, settings, given)
        self.agent = agent
        env = self.env or make_env(self.config.env, seed=None)
        try:
            check_sizes({"agent": agent}, env)
        finally:
            if self.env is None:
                env.close()

    @python_arguments(RLConfig)
    def train(self) -> RLResult:
        """Run (or, with `resume`, continue) the run; returns where it went and how it ended."""
        return train_rl(self.config, env=self.env, agent=self.agent)


def train_rl(config: RLConfig, env=None, agent: SAC | PPO | None = None) -> RLResult:
    """Run (or resume) SAC or PPO training; returns where it went and the final evaluation.
    `env`, `agent`: objects to train with instead of the config's (`RLLearner`)."""
    if is_pixel_env(config.env):
        from prefrl.loops.frames import train_frames

        if env is not None or agent is not None:
            raise TypeError("agents on frames are made from the config (env and agent objects "
                            "are not taken yet)")  # fmt: skip
        return train_frames(config)
    algo = config.algo + ("-demos" if config.demos is not None else "")
    name = config.name or run_name(config.env, algo, config.seed)
    check_resumed_identity(config)
    demos = load_rl_demos(config, env)
    loop, metrics = start_run(lambda c, d: RLRun(c, d, env, agent, demos), config, name)
    try:
        if config.envs > 1:
            from prefrl.loops.rl_envs import run_sac_envs

            return run_sac_envs(loop, metrics)
        return (_run if config.algo == "sac" else _run_ppo)(loop, metrics)
    finally:
        metrics.close()
        loop.close()


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


def _start(loop: RLRun, metrics: MetricsLogger):
    """What both one-env loops begin with: the first observation, the episode log, the progress
    display and the periodic work."""
    obs, _ = loop.env.reset(seed=loop.config.seed + loop.step)
    return obs, EpisodeLog(loop, metrics), *periodic_work(loop, metrics)


def _run(loop: RLRun, metrics: MetricsLogger) -> RLResult:
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
    return RLResult(loop.run_dir, loop.step, periodic.final, periodic.video, stop.requested)


def _run_ppo(loop: RLRun, metrics: MetricsLogger) -> RLResult:
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
    return RLResult(loop.run_dir, loop.step, periodic.final, periodic.video, stop.requested)
