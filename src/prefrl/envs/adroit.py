"""Adroit (a 24-DoF Shadow hand, through gymnasium-robotics 1.4.2: the adroit extra) as the
`adroit:` family with a sparse success: `adroit:door`, `adroit:pen`, `adroit:hammer`,
`adroit:relocate`.

The reward is `info["success"]` as 0/1 (door: hinge opened; pen: at the target orientation;
hammer: nail driven in; relocate: ball at the target) and episodes never end early. Each reset
draws part of the scene into the *model* (the door's position, the pen's target orientation, the
ball's and target's positions), so a state that replays exactly is those model fields plus
MuJoCo's integration state (positions, velocities, warm starts, controls, time).
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import mujoco
import numpy as np

from prefrl.envs.backends import GymMujocoBackend, get_mujoco_state, set_mujoco_state

TASKS = {"door": "AdroitHandDoor-v1", "pen": "AdroitHandPen-v1",
         "hammer": "AdroitHandHammer-v1", "relocate": "AdroitHandRelocate-v1"}  # fmt: skip
# The RFCL paper's episode lengths (and D4RL's): gymnasium-robotics registers the pen with 200 steps,
# the paper runs it for 100 and judges success at the last one.
EPISODE_STEPS = {"door": 200, "pen": 100, "hammer": 200, "relocate": 200}
INSTALL = "the Adroit environments need the adroit extra: pip install 'prefrl[adroit]'"


def _randomised_fields(base) -> list[tuple[np.ndarray, int]]:
    """(model array, row) of what each task's reset draws into the model."""
    m, task = base.model, type(base).__name__
    if task == "AdroitHandDoorEnv":  # the door's position
        return [(m.body_pos, base.door_body_id)]
    if task == "AdroitHandPenEnv":  # the target orientation
        return [(m.body_quat, base.target_obj_body_id)]
    if task == "AdroitHandHammerEnv":  # the board's height
        return [(m.body_pos, base.target_body_id)]
    if task == "AdroitHandRelocateEnv":  # the ball and its target
        return [(m.body_pos, base.obj_body_id), (m.site_pos, base.target_obj_site_id)]
    raise ValueError(f"{task} is not a known Adroit task")


CAMERAS = {"door": ((0.0, 0.05, 0.25), 1.3, 90.0, -25.0),
           "pen": ((0.08, -0.24, 0.25), 0.65, -45.0, -25.0),
           "hammer": ((0.0, -0.1, 0.12), 1.0, 45.0, -35.0),
           "relocate": ((0.0, -0.05, 0.15), 1.1, 60.0, -35.0)}  # fmt: skip
"""Each task's camera: (point looked at, distance, azimuth, elevation), framing the hand and
what it works on for every reset (the door at its heights, the ball and its target anywhere).
gymnasium-robotics' own cameras look at the model's centre, under the table: the pen's showed
the table alone."""


class AdroitBackend(GymMujocoBackend):
    """MuJoCo's integration state, after the randomised model fields (a few numbers)."""

    def __init__(self, env, task: str, width: int, height: int, fast: bool = True):
        super().__init__(env, width, height, fast)
        self.task = task

    def _make_camera(self) -> mujoco.MjvCamera:
        cam = mujoco.MjvCamera()
        mujoco.mjv_defaultFreeCamera(self.base.model, cam)
        cam.lookat[:], cam.distance, cam.azimuth, cam.elevation = CAMERAS[self.task]
        return cam

    def get_state(self) -> np.ndarray:
        fields = [array[row].astype(np.float64) for array, row in _randomised_fields(self.base)]
        return np.concatenate([*fields, get_mujoco_state(self.base.model, self.base.data)])

    def set_state(self, state: np.ndarray) -> None:
        state = np.asarray(state, np.float64).reshape(-1)
        at = 0
        for array, row in _randomised_fields(self.base):
            n = array.shape[1]
            array[row] = state[at : at + n]
            at += n
        set_mujoco_state(self.base.model, self.base.data, state[at:])


class SparseSuccess(gym.Wrapper):
    """Reward = `info["success"]` (0/1); never terminated (the time limit truncates).

    The observation is made again from the positions after the step. gymnasium-robotics reads
    body and site positions straight after `mj_step`, which computed them before its last
    substep, so they lag the joint positions by 2 ms (up to 2.6 cm on a fast hand), while a
    restored state's observation (after `mj_forward`) does not: an episode started from a demo
    state would otherwise see its first observation made differently from the rest."""

    def step(self, action):
        _, _, _, truncated, info = self.env.step(action)
        base = self.env.unwrapped
        mujoco.mj_kinematics(base.model, base.data)
        success = bool(info.get("success", False))
        return base._get_obs(), float(success), False, truncated, {**info, "success": success}


def ids() -> list[str]:
    return [f"adroit:{name}" for name in TASKS]


def installed() -> bool:
    return importlib.util.find_spec("gymnasium_robotics") is not None


def make(name: str, width: int, height: int, fast: bool, render: bool):
    import contextlib
    import io
    import warnings

    # (Without its note on the Dense-v1 rewards, printed at import: prefrl never uses them.)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):  # fmt: skip
        warnings.simplefilter("ignore")
        try:
            import gymnasium_robotics
        except ImportError as e:
            raise ImportError(INSTALL) from e
        gym.register_envs(gymnasium_robotics)
    env = SparseSuccess(gym.make(TASKS[name], max_episode_steps=EPISODE_STEPS[name]))
    if render:
        from prefrl.envs.backends import prepare_offscreen

        prepare_offscreen(env.unwrapped.model, width, height, fast)
    return env, AdroitBackend(env, name, width, height, fast)
