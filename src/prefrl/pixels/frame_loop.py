"""Agents on frames (`movingdot`, `atari:*`): A2C or PPO over `n_envs` envs stepped side by
side, on the env's true reward (`prefrl rl --algo a2c|ppo --env atari:Pong`), or on a learned
one (`prefrl.pixels.preferences`).

Steps are agent steps summed over the envs (the seed's "timesteps"): an update every
`n_envs * n_steps` of them. A checkpoint holds the agent and the loop's counters; a resumed run
starts fresh episodes (the ones in progress when it stopped are not part of a checkpoint).
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np

from prefrl.agents.a2c import A2C, FrameRollout, bootstrap_truncated
from prefrl.agents.frame_ppo import FramePPO
from prefrl.envs import FrameVectorEnv, PixelEnv, make_pixel_env
from prefrl.envs.pool import seeded
from prefrl.render.video import Enlarged, block_scale
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, write_json
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.progress import TrainingProgress
from prefrl.rundir.stop import StopRequest, graceful_stop
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import EvalResult
from prefrl.training.loop import (
    PeriodicTasks,
    TrainingLoop,
    check_resumed_identity,
    run_name,
    start_run,
    stoppable,
)
from prefrl.training.result import TrainResult, finished


class FrameRun(TrainingLoop):
    checkpoint_seconds: float | None = None
    """Also checkpoint after this long without one (a run a person labels); None: steps alone."""

    def __init__(self, config, run_dir: Path):
        cfg = config.ppo_frames if config.algo == "ppo" else config.a2c
        first_seed = config.seed * 10_000
        # (this process's copy of env 0 tells the loop the env's shapes and frame rate)
        super().__init__(config, run_dir, make_pixel_env(config.env, seed=first_seed))
        self.envs = FrameVectorEnv(seeded(make_pixel_env, config.env, first_seed), cfg.n_envs,
                                   config.env_workers)  # fmt: skip
        shape = (self.env.obs_shape, self.env.n_actions)
        if config.algo == "ppo":  # (its updates, over which `anneal` lowers its step sizes)
            updates = -(-config.steps // (cfg.n_envs * cfg.n_steps))
            self.agent = FramePPO(cfg, *shape, total_updates=updates)
        else:
            self.agent = A2C(cfg, *shape)
        self.key = jax.random.key(config.seed, impl="rbg")
        self.state = self.agent.init(jax.random.fold_in(self.key, 1))
        self.episodes = 0
        self.begun = False  # (whether `begin` did all it does: --stop-after may stop it early)
        self.stop = StopRequest()  # (the running stage's: `begin`'s, then the agent's steps')
        self.progress: TrainingProgress | None = None  # (the agent's steps' display)

    def save(self) -> Path:
        self.check_savable(self.state)
        tmp = begin_checkpoint(self.run_dir, self.step)
        self.write_policy(tmp)  # (the agent and the config)
        write_json(tmp / "loop.json", {"step": self.step, "episodes": self.episodes,
                                       "last_eval": self.last_eval, "begun": self.begun})  # fmt: skip
        self.save_more(tmp)
        return commit_checkpoint(tmp, keep=self.config.keep_checkpoints)

    # What a loop with another reward changes (`FramePreferenceRun`):
    @property
    def title(self) -> str:
        return self.config.algo.upper()

    def save_more(self, ckpt: Path) -> None:
        """Adds to a checkpoint being written."""

    def begin(self, metrics: MetricsLogger) -> bool:
        """Work before the first update (once per run, not again on resuming); returns whether
        it is all done (False: stopped after a phase, as the config asked, or by `self.stop`)."""
        return True

    def env_step(self, obs: np.ndarray, action: np.ndarray, step: int):
        """One step of every env: (obs, reward, terminated, truncated, final_obs)."""
        return self.envs.step(action)

    def rollout_rewards(self, obs: np.ndarray, action: np.ndarray, true_reward: np.ndarray):
        """The rewards A2C learns from, for a rollout's (T, N) steps."""
        return true_reward.copy()

    def after_update(self, metrics: MetricsLogger) -> None:
        """Work after each A2C update."""

    def add_to_result(self, result: TrainResult) -> None:
        """What the run adds to its result (its labels, its learned reward's agreement)."""

    def restore(self, ckpt: Path) -> None:
        self.state = self.agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        loop = json.loads((ckpt / "loop.json").read_text())
        self.step, self.episodes, self.last_eval = loop["step"], loop["episodes"], loop["last_eval"]
        self.begun = loop.get("begun", True)  # (checkpoints before it was kept: after begin)

    def policy(self, obs: np.ndarray, key: jax.Array, step: int) -> np.ndarray:
        return np.asarray(self.agent.act(self.state.params, obs, key, step)[0])

    def evaluate(self, record: bool) -> EvalResult:
        cfg = self.config
        if self._eval_envs is None:
            self._eval_envs = [make_pixel_env(cfg.env, seed=cfg.seed + 1_000_000 + i)
                               for i in range(cfg.eval_episodes)]  # fmt: skip
        key = jax.random.fold_in(self.key, 2)
        return evaluate_frames(lambda obs, t: self.policy(obs, key, t),
                               self._eval_envs, record, cfg.render_size)  # fmt: skip

    def close(self) -> None:
        self.envs.close()
        super().close()


def evaluate_frames(policy, envs: list[PixelEnv], record: bool, size: int = 256,
                    max_frames: int = 4000) -> EvalResult:  # fmt: skip
    """One episode in each env, the policy sampling its actions (an argmax policy can stall on
    Atari); with `record`, the first env's emulator frames in colour (the first `max_frames`,
    at the game's frame rate), each pixel a block, at least `size` pixels high."""
    n = len(envs)
    obs = np.stack([env.reset() for env in envs])
    returns, lengths, done = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, bool)
    frames = [envs[0].render()] if record else []
    t = 0
    while not done.all():
        actions = policy(obs, t)
        t += 1
        for i, env in enumerate(envs):
            if done[i]:
                continue
            colour = frames if i == 0 and record and len(frames) < max_frames else None
            obs[i], reward, terminated, truncated = env.step(int(actions[i]), colour=colour)
            returns[i] += reward
            lengths[i] += 1
            done[i] = terminated or truncated
    del frames[max_frames:]
    scale = block_scale(frames[0].shape[0], size) if frames else 1
    return EvalResult(returns, lengths, Enlarged(frames, scale), fps=envs[0].game.fps)


def train_frames(config, loop_class=None, callbacks: Callbacks | None = None) -> TrainResult:
    """Run (or resume) A2C or PPO on a pixel env (on its true reward, or with `loop_class`
    another reward: `FramePreferenceRun`)."""
    name = config.name or run_name(config.env, config.algo, config.seed)
    check_resumed_identity(config)
    make_pixel_env(config.env, seed=0).close()  # (a game that is not there: before any run dir)
    loop, metrics = start_run(loop_class or FrameRun, config, name, callbacks)
    result = TrainResult(loop.run_dir, loop.step, title=f"{loop.title} on {config.env}")
    try:
        if not loop.begun and _begin(loop, metrics):
            result.interrupted = True
        elif not loop.begun or getattr(config, "stop_after", None) is not None:
            loop.save()  # (a run stopped before its agent: resumed without --stop-after, it goes on)
            result.details["stop_after"] = getattr(config, "stop_after", None)
        else:
            result.final_eval, result.video, result.interrupted = _run(loop, metrics)
        result.steps = loop.step
        loop.add_to_result(result)
        for note in result.details.get("notes", []):
            print(f"note: {note}", flush=True)
    finally:
        metrics.close()
        loop.close()
    return finished(result)


def _begin(loop: FrameRun, metrics: MetricsLogger) -> bool:
    """`loop.begin`, stoppable as the agent's steps are: a stop is said at once, ends the work
    at its next step (a reward fit's gradient step) and checkpoints it, to resume from there.
    Returns whether it was stopped."""
    with graceful_stop(say=print) as stop:
        loop.stop = loop.callbacks.request = stop
        try:
            loop.begun = loop.begin(metrics)
        except KeyboardInterrupt:  # (a second Ctrl-C: the latest checkpoint stays the one)
            return True
        if stop.requested:
            loop.save()
        return stop.requested


class EpisodeReturns:
    """Each env's running episode return; logged (train/episode_return) as episodes end."""

    def __init__(self, n: int, loop: FrameRun, metrics: MetricsLogger):
        self.ret, self.length = np.zeros(n), np.zeros(n, np.int64)
        self.loop, self.metrics = loop, metrics

    def add(self, step: int, reward: np.ndarray, ended: np.ndarray) -> None:
        self.ret += reward
        self.length += 1
        for i in np.flatnonzero(ended):
            self.loop.episodes += 1
            self.metrics.log(step, {"train/episode_return": float(self.ret[i]),
                                    "train/episode_length": int(self.length[i])})  # fmt: skip
            self.ret[i], self.length[i] = 0.0, 0


def _run(loop: FrameRun, metrics: MetricsLogger):
    cfg, agent = loop.config, loop.agent
    steps, n = agent.config.n_steps, agent.config.n_envs
    obs = loop.envs.reset()
    rollout_obs = np.zeros((steps, *obs.shape), np.uint8)
    rollout_action = np.zeros((steps, n), np.int32)
    rollout_log_prob, rollout_value = np.zeros((2, steps, n), np.float32)
    rollout_reward = np.zeros((steps, n), np.float32)
    rollout_done = np.zeros((steps, n), np.float32)
    rollout_cut = np.zeros((steps, n), bool)  # (episodes cut by a time limit)
    finals = np.zeros((steps, *obs.shape), np.uint8)
    progress = TrainingProgress(cfg.steps, loop.step, enabled=cfg.progress,
                                last_eval=loop.last_eval, unit="agent steps")  # fmt: skip
    periodic = PeriodicTasks(loop, metrics, progress, loop.title, loop.checkpoint_seconds)
    episodes = EpisodeReturns(n, loop, metrics)
    with stoppable(loop, progress) as stop:
        loop.stop, loop.progress = stop, progress
        progress.say("compiling the agent (its first rollout and update wait for it)")
        while loop.step < cfg.steps and not stop.requested:
            params = loop.state.params
            for t in range(steps):
                action, log_prob, value = map(
                    np.asarray, agent.act(params, obs, loop.key, loop.step + t * n)
                )
                rollout_obs[t], rollout_action[t] = obs, action
                rollout_log_prob[t], rollout_value[t] = log_prob, value
                obs, reward, terminated, truncated, finals[t] = loop.env_step(
                    obs, action, loop.step + t * n
                )
                rollout_reward[t], rollout_cut[t] = reward, truncated
                rollout_done[t] = terminated | truncated
                episodes.add(loop.step + (t + 1) * n, reward, terminated | truncated)
            reward = loop.rollout_rewards(rollout_obs, rollout_action, rollout_reward)
            for t in np.flatnonzero(rollout_cut.any(1)):  # (time limits are bootstrapped)
                reward[t] = bootstrap_truncated(agent, params, reward[t], rollout_cut[t], finals[t])
            rollout = FrameRollout(rollout_obs, rollout_action, rollout_log_prob, rollout_value,
                                   reward, rollout_done, obs)  # fmt: skip
            loop.state, update_metrics = agent.update(loop.state, rollout, loop.key)
            loop.after_update(metrics)
            first, loop.step = loop.step + 1, loop.step + steps * n
            for step in range(first, loop.step + 1):  # (intervals need not be multiples of n)
                periodic.after_step(min(step, cfg.steps), update_metrics)
                if step >= cfg.steps:
                    break
    return periodic.final, periodic.video, stop.requested
