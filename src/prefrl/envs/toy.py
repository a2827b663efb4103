"""Built-in tasks: pure numpy, fast enough to train on inside the test suite."""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np


class PointReach(gym.Env):
    """A point mass pushed by a bounded force towards a goal drawn at each reset.

    Observation: position (2), velocity (2), goal (2). Action: force in [-1, 1]^2.
    Reward: minus the distance to the goal. 50 steps per episode (then truncated).
    A random policy scores about -45; a good one about -10.
    """

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 10}
    dt = 0.1
    max_steps = 50

    def __init__(self, render_mode: str | None = None, width: int = 128, height: int = 128):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode = render_mode
        self.width, self.height = width, height
        self._state = np.zeros(7, np.float64)  # pos, vel, goal, elapsed steps

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        pos = self.np_random.uniform(-1.0, 1.0, 2)
        goal = self.np_random.uniform(-1.0, 1.0, 2)
        self._state = np.concatenate([pos, np.zeros(2), goal, [0.0]])
        return self.observe(), {}

    def step(self, action):
        a = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
        s = self._state
        vel = 0.8 * s[2:4] + self.dt * 4.0 * a
        pos = np.clip(s[0:2] + self.dt * vel, -1.5, 1.5)
        s[0:2], s[2:4], s[6] = pos, vel, s[6] + 1
        reward = -float(np.linalg.norm(pos - s[4:6]))
        truncated = s[6] >= self.max_steps
        return self.observe(), reward, False, bool(truncated), {}

    def observe(self) -> np.ndarray:
        return self._state[:6].astype(np.float32)

    def get_state(self) -> np.ndarray:
        return self._state.copy()

    def set_state(self, state: np.ndarray) -> None:
        state = np.asarray(state, np.float64).reshape(-1)
        if state.shape != (7,):
            raise ValueError(f"state has {state.shape[0]} values; PointReach's state has 7")
        self._state = state.copy()

    def render(self) -> np.ndarray:
        h, w = self.height, self.width
        img = np.full((h, w, 3), 235, np.uint8)
        yy, xx = np.mgrid[0:h, 0:w]

        def disc(xy, radius, color):
            cx = (xy[0] + 1.5) / 3.0 * (w - 1)
            cy = (1.5 - xy[1]) / 3.0 * (h - 1)
            img[(xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2] = color

        disc(self._state[4:6], max(2, w // 20), (40, 170, 60))
        disc(self._state[0:2], max(2, w // 28), (200, 50, 50))
        return img


class PointFree(PointReach):
    """PointReach without a goal or a reward: a task only preferences can define (e.g. "draw a
    circle"). The goal marker is hidden; the reward is always 0."""

    has_true_reward = False

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, 0.0, terminated, truncated, info

    def render(self) -> np.ndarray:
        goal = self._state[4:6].copy()
        self._state[4:6] = 10.0  # off the canvas
        try:
            return super().render()
        finally:
            self._state[4:6] = goal
