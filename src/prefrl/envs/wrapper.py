from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from prefrl.envs.backends import Backend


def flatten_observation(obs: Any) -> np.ndarray:
    """Dicts (dm_control) are concatenated in their own key order; arrays are raveled."""
    if isinstance(obs, dict):
        return np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in obs.values()])
    return np.asarray(obs, np.float32).reshape(-1)


STATE_ENVS = "Hopper-v5 and Gymnasium's other MuJoCo envs, Pendulum-v1, dmc:*, toy:*"
"""Examples of what prefrl's state-based workflows take, for errors about what they do not."""


def check_action_space(env_id: str, space) -> None:
    """prefrl's state-based agents act with vectors of numbers: refuse any other action space,
    naming it."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(  # noqa: TRY004 (a bad env id, reported like other bad ids)
            f"{env_id!r} has {space} actions; prefrl's agents need continuous actions (a Box "
            f"space), as in {STATE_ENVS}"
        )


class PrefrlEnv(gym.Wrapper):
    """The environment every prefrl loop sees.

    - observations: flat float32 vectors;
    - actions: in [-1, 1] per dimension, rescaled to the wrapped env's bounds;
    - `get_state()` / `set_state(state)`: save and restore the simulation exactly;
    - `render()`: an RGB array (when made with `render=True`).
    """

    given = None
    """An env object a Python user gave that was never registered: its copies (`envs.given`);
    None for envs made by id."""

    def __init__(
        self, env: gym.Env, env_id: str, backend: Backend, seed: int | None, render: bool = False
    ):
        super().__init__(env)
        self._render_enabled = render
        check_action_space(env_id, env.action_space)
        self.env_id = env_id
        self.backend = backend
        low = np.asarray(env.action_space.low, np.float64)
        high = np.asarray(env.action_space.high, np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError(f"{env_id!r} has unbounded actions; prefrl needs bounded ones")
        self._rescale = not (np.all(low == -1.0) and np.all(high == 1.0))
        self._center, self._half_range = (high + low) / 2.0, (high - low) / 2.0
        self.action_space = gym.spaces.Box(-1.0, 1.0, env.action_space.shape, np.float32)
        obs_dim = int(flatten_observation(_sample_space(env.observation_space)).shape[0])
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self._seed = seed
        self._seeded = False
        if seed is not None:
            self.action_space.seed(seed)

    @property
    def obs_dim(self) -> int:
        return self.observation_space.shape[0]

    @property
    def action_dim(self) -> int:
        return self.action_space.shape[0]

    @property
    def fps(self) -> float:
        """Frames per second of real time when rendering every step."""
        return float(
            self.backend.fps()
            if hasattr(self.backend, "fps")
            else self.env.metadata.get("render_fps", 30)
        )

    @property
    def max_episode_steps(self) -> int | None:
        """The episode time limit in steps (None when the env sets none)."""
        return time_limit(self.env, self.backend)

    @property
    def restores_state(self) -> bool:
        """Whether `set_state` works, so clips of stored segments can be rendered again (False
        for a user's Gymnasium env that is not a MuJoCo one)."""
        return bool(getattr(self.backend, "restores_state", True))

    @property
    def has_true_reward(self) -> bool:
        """False for tasks defined only by what people prefer (their reward is always 0)."""
        return bool(getattr(self.env.unwrapped, "has_true_reward", True))

    def reset(self, *, seed: int | None = None, options=None):
        if seed is None and not self._seeded:
            seed = self._seed
        self._seeded = True
        obs, info = self.env.reset(seed=seed, options=options)
        return flatten_observation(obs), info

    def step(self, action):
        action = np.asarray(action, np.float64)
        if self._rescale:
            action = self._center + self._half_range * np.clip(action, -1.0, 1.0)
        obs, reward, terminated, truncated, info = self.env.step(action)
        return flatten_observation(obs), float(reward), bool(terminated), bool(truncated), info

    def get_state(self) -> np.ndarray:
        """The simulation state as a flat float64 array (episode step counters not included)."""
        return self.backend.get_state()

    def set_state(self, state: np.ndarray) -> np.ndarray:
        """Restore a state from `get_state()`; returns the observation of that state. Works on a
        freshly made env too (a clip renderer's): one never reset is reset first, since some
        families (classic control) hold no state, and cannot render, until then."""
        if not self._seeded:
            self.reset()
        self.backend.set_state(state)
        return flatten_observation(self.backend.observe())

    def render(self) -> np.ndarray:
        if not self._render_enabled:
            raise RuntimeError(f"{self.env_id!r} was made without rendering: use render=True")
        return self.backend.render()

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()
        super().close()


def _sample_space(space: gym.Space):
    if isinstance(space, gym.spaces.Dict):
        return {k: np.zeros(s.shape, np.float32) for k, s in space.spaces.items()}
    return np.zeros(space.shape, np.float32)


def time_limit(env: gym.Env, backend) -> int | None:
    """The episode time limit of `env` in steps: its TimeLimit wrapper's, or its backend's own
    (None: it sets none)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    limit = getattr(backend, "max_episode_steps", None)
    return limit() if limit is not None else None


NO_TIME_LIMIT = (
    "it has no time limit, so an evaluation episode lasts until the env ends it itself, maybe "
    "never: wrap it, gymnasium.wrappers.TimeLimit(env, max_episode_steps=N)"
)
