"""Adroit (a 24-DoF Shadow hand, through gymnasium-robotics 1.4.2: the adroit extra) as the
`adroit:` family with a sparse success: `adroit:door`, `adroit:pen`, `adroit:hammer`,
`adroit:relocate`, and each with a shaped reward, `adroit:<task>-dense`.

The reward is `info["success"]` as 0/1 (door: hinge opened; pen: at the target orientation;
hammer: nail driven in; relocate: ball at the target) and episodes never end early. The dense
tasks are the same simulator and success with the task's shaped score as the reward: the score
`prefrl demos plan` plans with, which follows gymnasium-robotics' dense reward with two fixes.
The palm-to-object distance is a cost (gymnasium-robotics 1.4.2 *adds* it in relocate and
hammer, paying the hand to move away), and relocate's bonuses for a ball at its target count
only while the ball is in the hand (a thrown ball scores nothing). A policy trained on a dense
task records demos for the sparse one (`prefrl demos record --env adroit:pen`). Each reset
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
DENSE = "-dense"
INSTALL = "the Adroit environments need the adroit extra: pip install 'prefrl[adroit]'"


def _dist(a, b) -> float:
    return float(np.linalg.norm(a - b))


def door_score(base) -> float:
    """The palm near the handle, the latch turned, the hinge open (and a bonus once open)."""
    d, hinge = base.data, base.door_hinge_addrs
    latch = d.qpos[base.model.joint("latch").qposadr[0]]
    palm, handle = d.site_xpos[base.grasp_site_id], d.site_xpos[base.handle_site_id]
    return (-2 * _dist(palm, handle) + 2 * min(latch, 1.2) + 10 * d.qpos[hinge]
            + 10 * (d.qpos[hinge] >= 1.35))  # fmt: skip


def pen_score(base) -> float:
    """The pen's orientation against the target's, its distance from the target's place, big
    bonuses near success and a heavy cost for dropping it (the env's own is 5)."""
    d = base.data
    pen, place = d.xpos[base.obj_body_id], d.site_xpos[base.eps_ball_site_id]
    pen_axis = (d.site_xpos[base.obj_t_site_id] - d.site_xpos[base.obj_b_site_id]) / base.pen_length
    target_axis = (d.site_xpos[base.tar_t_site_id] - d.site_xpos[base.tar_b_site_id]) / (
        base.tar_length
    )
    distance, similarity = _dist(pen, place), float(pen_axis @ target_axis)
    near = distance < 0.075
    return (-distance + similarity + 10 * (near and similarity > 0.9)
            + 50 * (near and similarity > 0.95) - 50 * (pen[2] < 0.075))  # fmt: skip


def relocate_score(base) -> float:
    """The palm near the ball; once the ball is lifted, the ball near the target; bonuses for
    a ball at the target that is still in the hand."""
    d = base.data
    ball, palm = d.xpos[base.obj_body_id], d.site_xpos[base.S_grasp_site_id]
    target = d.site_xpos[base.target_obj_site_id]
    score, off = -_dist(palm, ball), _dist(ball, target)
    if ball[2] > 0.04:
        score += 1.0 - off
    if _dist(palm, ball) < 0.08:
        score += 10 * (off < 0.1) + 20 * (off < 0.05)
    return score


def hammer_score(base) -> float:
    """The palm near the hammer, its head near the nail, the nail driven in; bonuses for the
    hammer lifted and the nail nearly home."""
    d = base.data
    hammer, palm = d.xpos[base.obj_body_id], d.site_xpos[base.S_grasp_site_id]
    head, nail = d.site_xpos[base.tool_site_id], d.site_xpos[base.target_obj_site_id]
    depth = _dist(nail, d.site_xpos[base.goal_site_id])
    lifted = hammer[2] > 0.04 and head[2] > 0.04
    return (-_dist(palm, hammer) - _dist(head, nail) - 10 * depth + 2 * lifted
            + 25 * (depth < 0.02) + 75 * (depth < 0.01))  # fmt: skip


SHAPED_SCORES = {"door": door_score, "pen": pen_score, "relocate": relocate_score,
                 "hammer": hammer_score}  # fmt: skip
"""Each task's step score: the dense tasks' reward, the planner's score."""


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


class AdroitTask(gym.Wrapper):
    """Reward = `info["success"]` (0/1), or `score(base)` where given (a dense task); never
    terminated (the time limit truncates).

    The observation is made again from the positions after the step. gymnasium-robotics reads
    body and site positions straight after `mj_step`, which computed them before its last
    substep, so they lag the joint positions by 2 ms (up to 2.6 cm on a fast hand), while a
    restored state's observation (after `mj_forward`) does not: an episode started from a demo
    state would otherwise see its first observation made differently from the rest."""

    def __init__(self, env, score=None):
        super().__init__(env)
        self.score = score

    def step(self, action):
        _, _, _, truncated, info = self.env.step(action)
        base = self.env.unwrapped
        mujoco.mj_kinematics(base.model, base.data)
        success = bool(info.get("success", False))
        reward = float(success) if self.score is None else float(self.score(base))
        return base._get_obs(), reward, False, truncated, {**info, "success": success}


def ids() -> list[str]:
    return [f"adroit:{name}{kind}" for kind in ("", DENSE) for name in TASKS]


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
    task = name.removesuffix(DENSE)
    score = SHAPED_SCORES[task] if name.endswith(DENSE) else None
    env = AdroitTask(gym.make(TASKS[task], max_episode_steps=EPISODE_STEPS[task]), score)
    if render:
        from prefrl.envs.backends import prepare_offscreen

        prepare_offscreen(env.unwrapped.model, width, height, fast)
    return env, AdroitBackend(env, task, width, height, fast)
