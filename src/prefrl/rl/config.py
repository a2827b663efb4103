"""`RLConfig`: the settings of RL on an environment's own reward (`prefrl rl`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from prefrl.agents import PPOConfig, SACConfig
from prefrl.agents.a2c import A2CConfig
from prefrl.agents.frame_ppo import FramePPOConfig
from prefrl.data.demos import DemoSet, load_demos_of
from prefrl.envs import make_env
from prefrl.envs.registry import is_pixel_env, resolve
from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields, config_from_dict
from prefrl.training.policies import agent_policy, register_policy_kind

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
    """Show a progress bar; --no-progress: a plain line every --log-interval env steps
    instead (as where the output is not a terminal)."""
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


register_policy_kind(
    "rl",
    lambda stored: "algo" in stored,
    lambda ckpt, stored: agent_policy(ckpt, config_from_dict(RLConfig, stored)),
    fallback=True,
)
