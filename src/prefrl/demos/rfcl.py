"""Reverse Forward Curriculum Learning (Tao et al., ICLR 2024): a sparse-reward task learned by
SAC from a few demonstrations with simulator states.

1. Stage 1, reverse curriculum (`curriculum.ReverseCurriculum`): episodes start from demo
   states, first near each demo's end, then further back as the agent succeeds from them, with
   a time limit that grows with the distance left. Every update's batch is half online
   transitions, half demo transitions (demo reward: its success flag), unless the demos are used
   for their states alone (`demo_actions=False`).
2. Stage 2, forward curriculum (`curriculum.ForwardCurriculum`): episodes start from the task's
   own initial states (reset seeds), the learnable-but-unsolved ones first; the stage-1 replay
   buffer becomes the offline half of each batch, once the policy has filled a fresh online
   one for `warmstart_steps` steps.

The reward is the task's success flag (0/1) and episodes never terminate (the time limit
truncates them, and the critic always bootstraps). The headline metric is the success at an
episode's last step on the task's own initial states, with deterministic actions.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np

from prefrl.agents import SAC
from prefrl.data import Batch, ReplayBuffer
from prefrl.data.demos import DemoSet, demo_buffer
from prefrl.demos.curriculum import ForwardCurriculum, ReverseCurriculum, Start
from prefrl.demos.rfcl_config import RFCLConfig, method_name, method_slug
from prefrl.demos.rfcl_demos import action_bound, load_demos
from prefrl.envs import make_env
from prefrl.envs.pool import EnvPool, seeded
from prefrl.rundir.checkpoints import begin_checkpoint, commit_checkpoint, write_json
from prefrl.rundir.metrics import MetricsLogger
from prefrl.rundir.plots import Curve, plot_curriculum
from prefrl.rundir.progress import TrainingProgress
from prefrl.training.callbacks import Callbacks
from prefrl.training.evaluate import EvalResult
from prefrl.training.loop import (
    PeriodicTasks,
    TrainingLoop,
    check_resumed_identity,
    run_name,
    start_run,
    stoppable,
    warn_if_no_updates,
)
from prefrl.training.result import TrainResult, finished


def _start_from(env, seed: int, state: np.ndarray | None) -> np.ndarray:
    """A new episode: reset with `seed`, then (stage 1) jump to a demo's `state`."""
    obs, _ = env.reset(seed=seed)
    return obs if state is None else env.set_state(state)


def _step(env, action: np.ndarray) -> tuple[np.ndarray, bool, bool]:
    """(next observation, truncated, success)."""
    next_obs, _, _, truncated, info = env.step(action)
    return next_obs, bool(truncated), bool(info["success"])


class RFCLRun(TrainingLoop):
    """The agent, its buffers, both curricula and the episode in progress between steps."""

    eval_curve = Curve(
        "success rate on the task's initial states", (0.0, 1.0),
        (("eval/return_mean", "at the end of an episode"), ("eval/success_once", "at any step")),
        "at the end: ± 1 std over the evaluation episodes (each 0 or 1)",
    )  # fmt: skip
    keeps_best = True

    def __init__(self, config: RFCLConfig, run_dir: Path, demos: DemoSet | None = None):
        # Env i of the pool has seed `seed + i`; with the envs in this process the loop's own
        # env (demo checks, sizes, frame rate) is env 0.
        self.pool = EnvPool(seeded(make_env, config.env, config.seed), config.envs,
                            config.env_workers)  # fmt: skip
        here = self.pool.workers == 0
        env = self.pool.envs[0] if here else make_env(config.env, seed=config.seed)
        super().__init__(config, run_dir, env, owns_env=not here)
        self.demos = demos or load_demos(config, self.env)
        dims = (self.env.obs_dim, self.env.action_dim)
        self.agent = SAC(config.sac, *dims)
        self.key = jax.random.key(config.seed, impl="rbg")
        self.rng = np.random.default_rng(config.seed)
        self.state = self.agent.init(jax.random.fold_in(self.key, 1))
        self.online = ReplayBuffer(config.buffer_size, *dims)  # stage 1's, then stage 2's
        self.bound = action_bound(self.demos, config.demo_action_scale)
        """The env's action = the agent's (in [-1, 1]) x this, with --demo-action-scale."""
        self.offline = (
            demo_buffer(self.demos, "success", self.bound) if config.demo_actions else None
        )
        self.reverse = ReverseCurriculum([len(d.states) for d in self.demos.demos],
                                         config.reverse_delta, config.reverse_streak,
                                         config.reverse_time_divisor, config.solved_share)  # fmt: skip
        self.forward = ForwardCurriculum(config.forward_seeds, config.forward_history)
        self.stage, self.episodes = 1, 0
        self.stage2_step: int | None = None
        if not config.reverse_curriculum:  # (the demos' transitions stay the offline half)
            self.stage, self.stage2_step = 2, 0

    # ------------------------------------------------------------------ episodes
    def start_episode(self, i: int = 0) -> tuple[np.ndarray, Start | int, int]:
        """A new episode in env i: (first observation, what it started from: a curriculum
        `Start` or a reset seed, its time limit)."""
        if self.stage == 1:
            start = self.reverse.next_start(self.rng)
            state = self.demos[start.demo].states[start.step]
            obs = self.pool.call(i, _start_from, int(self.rng.integers(2**31)), state)
            return obs, start, start.time_limit
        if self.config.forward_curriculum:
            seed = self.forward.next_seed(self.rng)
        else:
            seed = int(self.rng.integers(self.config.forward_seeds))
        return self.pool.call(i, _start_from, seed, None), seed, self.env.max_episode_steps

    def end_episode(self, started: Start | int, success_at_end: bool, success_once: bool) -> None:
        """Tells the curriculum that started the episode how it ended: the reverse one by the
        success at its last step, the forward one by a success at any step (as the reference
        implementation scores reset seeds: a return above 0). A stage-1 episode that ends after
        stage 2 began, in another env, is not counted."""
        self.episodes += 1
        if not isinstance(started, Start):
            self.forward.record(started, success_once)
        elif self.stage == 1:
            self.reverse.record(started, success_at_end)
            if self.reverse.done:
                self.begin_stage2()

    def begin_stage2(self) -> None:
        """The stage-1 buffer becomes the offline half of every batch; a fresh online one."""
        self.stage, self.stage2_step = 2, self.step
        self.offline = self.online
        self.online = ReplayBuffer(self.config.buffer_size, self.env.obs_dim, self.env.action_dim)

    def updates_due(self, step: int) -> bool:
        """Whether env step `step` is followed by an update: after the first `warmstart_steps`
        steps, and after as many more once stage 2 began, which the policy collects into the
        fresh online buffer before any batch is half made of it (the reference implementation
        seeds stage 2 with the policy likewise)."""
        wait = self.config.warmstart_steps + (self.stage2_step or 0)
        return step > wait and step % self.config.update_every == 0

    def batch(self) -> Batch:
        size = self.agent.config.batch_size * self.agent.config.utd_ratio
        return self.online.sample_beside(self.offline, self.rng, size)

    def env_action(self, action: np.ndarray) -> np.ndarray:
        """The env's action for the agent's (buffers keep the agent's)."""
        return action if self.bound is None else action * self.bound

    # ------------------------------------------------------------------ evaluation
    def policy(self, obs: np.ndarray) -> np.ndarray:
        action = self.agent.act(self.state.actor_params, obs, self.key, 0, deterministic=True)
        return self.env_action(np.asarray(action))

    def evaluate(self, record: bool) -> EvalResult:
        """Episodes from the task's own initial states; the success at their last step is also
        given as the returns, so the learning curve shows it."""
        result = super().evaluate(record)
        result.returns = result.success.astype(np.float64)
        return result

    def curriculum_metrics(self) -> dict[str, float]:
        """Where the reverse curriculum's starts are, its stage, the episodes run (a run
        without the reverse curriculum has only the episodes)."""
        if not self.config.reverse_curriculum:
            return {"rfcl/episodes": float(self.episodes)}
        share = self.reverse.frontier / np.maximum(self.reverse.lengths - 1, 1)
        per_demo = {f"rfcl/start_fraction/demo_{i}": float(f) for i, f in enumerate(share)}
        per_demo |= {f"rfcl/solved/demo_{i}": float(s) for i, s in enumerate(self.reverse.solved)}
        return {**per_demo, "rfcl/stage": float(self.stage),
                "rfcl/demos_solved": float(self.reverse.solved.sum()),
                "rfcl/start_fraction_mean": float(share.mean()),
                "rfcl/episodes": float(self.episodes)}  # fmt: skip

    def close(self) -> None:
        super().close()
        self.pool.close()

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        self.check_savable(self.state)
        tmp = begin_checkpoint(self.run_dir, self.step)
        self.write_policy(tmp)  # (the agent and the config)
        self.online.save(tmp / "online.npz")
        if self.stage == 2 and self.offline is not None:
            self.offline.save(tmp / "offline.npz")
        write_json(tmp / "loop.json", {
            "step": self.step, "stage": self.stage, "stage2_step": self.stage2_step,
            "episodes": self.episodes, "last_eval": self.last_eval,
            "rng": self.rng.bit_generator.state, "reverse": self.reverse.state_dict(),
            "forward": self.forward.state_dict(),
            "action_bound": self.bound_list(),
        })  # fmt: skip
        return commit_checkpoint(tmp)

    def write_policy(self, folder: Path) -> None:
        super().write_policy(folder)  # (and the bound its actions are scaled by)
        write_json(folder / "loop.json", {"action_bound": self.bound_list()})

    def bound_list(self) -> list[float] | None:
        return None if self.bound is None else self.bound.tolist()

    def restore(self, ckpt: Path) -> None:
        self.state = self.agent.state_from_bytes((ckpt / "agent.msgpack").read_bytes())
        loop = json.loads((ckpt / "loop.json").read_text())
        self.online = ReplayBuffer.load(ckpt / "online.npz")
        if (ckpt / "offline.npz").exists():
            self.offline = ReplayBuffer.load(ckpt / "offline.npz")
        self.step, self.stage, self.stage2_step = loop["step"], loop["stage"], loop["stage2_step"]
        self.episodes, self.last_eval = loop["episodes"], loop["last_eval"]
        self.rng.bit_generator.state = loop["rng"]
        self.reverse.load_state_dict(loop["reverse"])
        self.forward.load_state_dict(loop["forward"])


def train_rfcl(config: RFCLConfig, callback=None) -> TrainResult:
    """Run (or resume) RFCL; returns the final success rates on the task's initial states.
    `callback`: a function (or a list) called with a `TrainEvent` at each metrics row,
    evaluation and checkpoint; returning False stops the run."""
    callbacks = Callbacks(callback)
    name = config.name or run_name(config.env, method_slug(config), config.seed)
    check_resumed_identity(config)
    probe = make_env(config.env, seed=0)  # bad demos fail here, before a run directory is made
    try:
        demos = load_demos(config, probe)
    finally:
        probe.close()
    loop, metrics = start_run(lambda c, d: RFCLRun(c, d, demos), config, name, callbacks)
    try:
        result = _run(loop, metrics)
    finally:
        metrics.close()
        loop.close()
    return finished(result)


def _run(loop: RFCLRun, metrics: MetricsLogger) -> TrainResult:
    """Every env steps once a round; the round's env steps are then counted one by one (updates,
    logs, evaluations and checkpoints fall on the steps they are due at). A last round that would
    pass `steps` counts, and stores, only the steps up to it."""
    cfg, agent, n = loop.config, loop.agent, loop.config.envs
    progress = TrainingProgress(cfg.steps, loop.step, cfg.progress, loop.last_eval,
                                "eval success", eval_digits=2)  # fmt: skip
    warn_if_no_updates(progress, loop.step, cfg.warmstart_steps, cfg.steps)
    periodic = PeriodicTasks(loop, metrics, progress, f"{method_name(cfg)} on {cfg.env}")
    update_metrics = None
    obs = np.zeros((n, loop.env.obs_dim), np.float32)
    started: list[Start | int] = [0] * n
    limit, t = np.zeros(n, np.int64), np.zeros(n, np.int64)
    succeeded = np.zeros(n, bool)  # at some step of the episode in progress
    for i in range(n):
        obs[i], started[i], limit[i] = loop.start_episode(i)
    with stoppable(loop, progress) as stop:
        while loop.step < cfg.steps and not stop.requested:
            if loop.step < cfg.warmstart_steps:
                action = loop.rng.uniform(-1.0, 1.0, (n, loop.env.action_dim)).astype(np.float32)
            else:
                action = np.asarray(agent.act(loop.state.actor_params, obs, loop.key, loop.step))
            stepped = loop.pool.map(_step, [(a,) for a in loop.env_action(action)])
            first, loop.step = loop.step, min(loop.step + n, cfg.steps)
            counted = stepped[: loop.step - first]
            for i, (next_obs, _, success) in enumerate(counted):  # (never terminal)
                loop.online.add(obs[i], action[i], float(success), next_obs, False)
                obs[i] = next_obs
                succeeded[i] |= success
            for step in range(first + 1, loop.step + 1):
                if loop.updates_due(step):
                    loop.state, update_metrics = agent.update(loop.state, loop.batch(), loop.key)
            t += 1
            for i, (_, truncated, success) in enumerate(counted):
                if t[i] >= limit[i] or truncated:
                    stage = loop.stage
                    loop.end_episode(started[i], success, bool(succeeded[i]))
                    if loop.stage != stage:
                        progress.say(f"stage 2 (forward curriculum) from step {loop.step:,}")
                    obs[i], started[i], limit[i] = loop.start_episode(i)
                    t[i], succeeded[i] = 0, False
            for step in range(first + 1, loop.step + 1):
                if step % cfg.log_interval == 0 or step == cfg.steps:
                    metrics.log(step, loop.curriculum_metrics())
                due = step % cfg.eval_interval == 0 or step == cfg.steps
                if due and cfg.reverse_curriculum:
                    plot_curriculum(loop.run_dir)
                periodic.after_step(step, update_metrics, info=_stage(loop))
    if stop.requested and cfg.reverse_curriculum:  # (drawn at each evaluation; a stop between)
        plot_curriculum(loop.run_dir)
    final = periodic.final
    extra = final.extra if final is not None else {}
    details = {"method": method_name(cfg), "stage": loop.stage,
               "demos_solved": int(loop.reverse.solved.sum()), "demos": len(loop.demos),
               "success_once": extra.get("eval/success_once", float("nan"))}  # fmt: skip
    return TrainResult(loop.run_dir, loop.step, final, stop.requested, video=periodic.video,
                       best_eval=periodic.best.best, title=periodic.title,
                       details=details)  # fmt: skip


def _stage(loop: RFCLRun) -> str | None:
    """The progress bar's note: the curriculum's stage and demos solved (none without the
    reverse curriculum: every episode is then from the task's initial states)."""
    if not loop.config.reverse_curriculum:
        return None
    return f"stage {loop.stage}, demos solved {int(loop.reverse.solved.sum())}/{len(loop.demos)}"
