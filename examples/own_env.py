"""Your own env class, never registered with Gymnasium, taught from preferences: a point on a
plane should reach a target it sees. The scripted teacher prefers the clip that earns more of
the env's reward (minus the distance to the target); the agent sees only its answers.
`check_env` says first what prefrl can do with the env, and why not where it cannot."""

import sys
from typing import ClassVar

import gymnasium as gym
import numpy as np

from prefrl import PreferenceLearner, ScheduleConfig, check_env


class ReachTarget(gym.Env):
    """Observation: the point's and the target's positions; action: the point's velocity."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.point, self.target = self.np_random.uniform(-1, 1, (2, 2))
        return np.concatenate([self.point, self.target], dtype=np.float32), {}

    def step(self, action):
        self.point = np.clip(self.point + 0.1 * np.asarray(action), -2, 2)
        distance = float(np.linalg.norm(self.point - self.target))
        obs = np.concatenate([self.point, self.target], dtype=np.float32)
        return obs, -distance, False, False, {"success": distance < 0.1}

    def render(self):  # (evaluation videos) the target green, the point red, on 64x64 pixels
        frame = np.full((64, 64, 3), 255, np.uint8)
        for (x, y), colour in ((self.target, (0, 160, 0)), (self.point, (200, 0, 0))):
            col, row = np.clip(((x + 2) * 16, (2 - y) * 16), 2, 61).astype(int)
            frame[row - 2 : row + 3, col - 2 : col + 3] = colour
        return frame


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000  # (CI runs it shorter)
env = gym.wrappers.TimeLimit(ReachTarget(render_mode="rgb_array"), max_episode_steps=50)
print(check_env(env))  # continuous actions, restorable state, rendering, success flag: why (not)
learner = PreferenceLearner(
    env, teacher="oracle", steps=steps, warmstart_steps=1_000,
    schedule=ScheduleConfig(budget=200, session_size=20, interval=1_000), eval_interval=2_000,
)  # fmt: skip
result = learner.train()
print(result)
