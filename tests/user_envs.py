"""A user's own Gymnasium envs, registered on import (as `prefrl --env tests.user_envs:...`
imports this module): one plain numpy task and one MuJoCo task, neither known to prefrl."""

from typing import ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv


class Slider(gym.Env):
    """Move a point on a line to 0: reward -|x|; actions in [-2, 2] (rescaled by prefrl)."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        self.render_mode, self.x, self.t = render_mode, 0.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
        return np.array([self.x, 0.0], np.float32), {}

    def step(self, action):
        self.x += 0.1 * float(np.clip(action[0], -2, 2))
        self.t += 1
        return np.array([self.x, self.t / 50], np.float32), -abs(self.x), False, self.t >= 50, {}

    def render(self):
        frame = np.zeros((32, 64, 3), np.uint8)
        frame[:, int(np.clip(32 + 16 * self.x, 0, 63))] = 255
        return frame


_BALL = """<mujoco><worldbody><body name="ball" pos="0 0 0.1"><joint name="x" type="slide" axis="1 0 0"/>
<geom size="0.1" mass="1"/></body></worldbody><actuator><motor joint="x" gear="1" ctrlrange="-1 1"/></actuator>
</mujoco>"""


class RollingBall(MujocoEnv):
    """Push a ball along x towards 0 (MuJoCo: prefrl saves and restores its state exactly)."""

    metadata: ClassVar[dict] = {"render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"],
                "render_fps": 50}  # fmt: skip

    def __init__(self, **kwargs):
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(_BALL)
        space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        super().__init__(f.name, 10, observation_space=space, **kwargs)  # (50 steps/s)

    def step(self, action):
        self.do_simulation(action, self.frame_skip)
        return self._get_obs(), -abs(float(self.data.qpos[0])), False, False, {}

    def _get_obs(self):
        return np.concatenate([self.data.qpos, self.data.qvel])

    def reset_model(self):
        self.set_state(self.init_qpos + self.np_random.uniform(-0.5, 0.5, 1), self.init_qvel)
        return self._get_obs()


gym.register("Slider-v0", entry_point=Slider, max_episode_steps=50)
gym.register("RollingBall-v0", entry_point=RollingBall, max_episode_steps=40)
