"""Train any agent on a learned reward: a Gymnasium wrapper that replaces the env's reward."""

from __future__ import annotations

from typing import Protocol

import gymnasium as gym
import numpy as np

from prefrl.envs.wrapper import flatten_observation


class PerStepReward(Protocol):
    def predict(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Rewards for a batch of (obs, action) rows: obs (n, obs_dim), action (n, action_dim) in
        [-1, 1]."""


class LearnedReward(gym.Wrapper):
    """Replaces the reward with `model.predict(obs, action)` (any prefrl reward model, or anything
    with that method). The env's own reward stays in `info["true_reward"]`.

    Works on a `PrefrlEnv` or on the raw Gymnasium env (e.g. for Stable-Baselines3): observations
    are flattened and actions rescaled to [-1, 1] exactly as `PrefrlEnv` does, so the model sees
    what it was trained on.
    """

    def __init__(self, env: gym.Env, model: PerStepReward):
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Box):
            raise ValueError(  # noqa: TRY004 (a bad env, reported like other bad input)
                f"LearnedReward needs a Box action space, got {type(env.action_space).__name__}"
            )
        self.model = model
        low = np.asarray(env.action_space.low, np.float64)
        high = np.asarray(env.action_space.high, np.float64)
        self._low, self._range = low, high - low
        self._obs: np.ndarray | None = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._obs = flatten_observation(obs)
        return obs, info

    def step(self, action):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        scaled = 2.0 * (np.asarray(action, np.float64) - self._low) / self._range - 1.0
        scaled = np.clip(scaled, -1.0, 1.0).astype(np.float32)
        reward = float(np.asarray(self.model.predict(self._obs[None], scaled[None])).reshape(-1)[0])
        obs, true_reward, terminated, truncated, info = self.env.step(action)
        info = {**info, "true_reward": float(true_reward)}
        self._obs = flatten_observation(obs)
        return obs, reward, terminated, truncated, info
