"""`sparse:pusher`: Gymnasium's Pusher-v5 with its object pushed to within 5 cm of the goal as a
sparse success, a middle ground between the mazes and Adroit that needs no extra."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

PUSHER_SUCCESS = 0.05
"""sparse:pusher succeeds with the object within this distance (m) of the goal, in the plane."""


class PusherSuccess(gym.Wrapper):
    """Gymnasium's Pusher-v5 with a sparse success: reward 1 on a step that ends with the object
    within `PUSHER_SUCCESS` of the goal (x, y), else 0; never terminated."""

    def step(self, action):
        obs, _, _, truncated, info = self.env.step(action)
        base = self.env.unwrapped
        gap = base.get_body_com("object")[:2] - base.get_body_com("goal")[:2]
        success = bool(np.linalg.norm(gap) <= PUSHER_SUCCESS)
        return obs, float(success), False, truncated, {**info, "success": success}
