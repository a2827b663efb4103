"""RL on the environment's own reward (SAC, or PPO): the baseline every preference workflow is
measured against."""

from __future__ import annotations

import gymnasium as gym

from prefrl.agents import PPO, SAC
from prefrl.envs import make_env
from prefrl.envs.registry import is_pixel_env
from prefrl.rl.config import RLConfig, load_rl_demos
from prefrl.rl.run import RLRun, run_ppo, run_sac
from prefrl.training.callbacks import Callbacks
from prefrl.training.loop import (
    check_resumed_identity,
    check_sizes,
    config_with,
    env_argument,
    python_arguments,
    run_name,
    start_run,
)
from prefrl.training.result import TrainResult, finished


class RLLearner:
    """SAC or PPO on an environment's own reward, from objects:

        result = RLLearner("Hopper-v5", steps=300_000).train()
        result = RLLearner(gymnasium.make("Pendulum-v1"), agent=PPO(PPOConfig(), 3, 1)).train()

    Args:
        env: an env id (`prefrl envs`), an env made by `prefrl.make_env`, or any Gymnasium
            env object: one of `gymnasium.make`, or an instance of your own class, never
            registered (evaluated on copies: `wrap_env`); yours to close.
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
        check_resumed_identity(self.config)  # (before an env is made for the sizes' check)
        self.agent = agent
        env = self.env or make_env(self.config.env, seed=None)
        try:
            check_sizes({"agent": agent}, env)
        finally:
            if self.env is None:
                env.close()

    @python_arguments(RLConfig)
    def train(self, callback=None) -> TrainResult:
        """Run (or, with `resume`, continue) the run; returns where it went and how it ended.
        `callback`: a function (or a list) called with a `TrainEvent` at each metrics row,
        evaluation and checkpoint; returning False stops the run."""
        return train_rl(self.config, env=self.env, agent=self.agent, callback=callback)


def train_rl(config: RLConfig, env=None, agent: SAC | PPO | None = None,
             callback=None) -> TrainResult:  # fmt: skip
    """Run (or resume) SAC or PPO training; returns where it went and the final evaluation.
    `env`, `agent`: objects to train with instead of the config's (`RLLearner`); `callback`:
    see `RLLearner.train`."""
    callbacks = Callbacks(callback)
    if is_pixel_env(config.env):
        from prefrl.pixels.frame_loop import train_frames

        if env is not None or agent is not None:
            raise TypeError("agents on frames are made from the config (env and agent objects "
                            "are not taken yet)")  # fmt: skip
        return train_frames(config, callbacks=callbacks)
    algo = config.algo + ("-demos" if config.demos is not None else "")
    name = config.name or run_name(config.env, algo, config.seed)
    check_resumed_identity(config)
    demos = load_rl_demos(config, env)
    loop, metrics = start_run(lambda c, d: RLRun(c, d, env, agent, demos), config, name,
                              callbacks)  # fmt: skip
    try:
        if config.envs > 1:
            from prefrl.rl.vector import run_sac_envs

            result = run_sac_envs(loop, metrics)
        else:
            result = (run_sac if config.algo == "sac" else run_ppo)(loop, metrics)
    finally:
        metrics.close()
        loop.close()
    return finished(result)
