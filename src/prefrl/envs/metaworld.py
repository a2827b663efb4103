"""MetaWorld's v3 tasks (a Sawyer arm; metaworld 3.1.1, installed without its MuJoCo pin) as the
`metaworld:` family: `metaworld:door-open`, `metaworld:stick-pull`, ...

Each task is MetaWorld's goal-observable variant (the goal is in the observation, as RFCL runs
them) with MetaWorld's own reward, `info["success"]` as a bool, episodes of `EPISODE_STEPS` that
never end early, and a new object and goal placement drawn at every reset from the env's seed.

metaworld 3.1.1 pins MuJoCo 3.3.0; prefrl runs on 3.17, where a weld constraint holds one more
number. MetaWorld resets its arm's welds by writing 11 of them, which fails on 3.17; `_pad_welds`
writes the same 11 and leaves the new one at the model's own value. Whether the tasks then
behave as on 3.3.0 was checked task by task (`tools/metaworld_check.py`): those that do not are
refused with what differs (`DIFFERS`).

A state is the reset's random vector (MetaWorld derives the object and goal placements, in the
model and in Python attributes, from it), the previous frame of the stacked observation, the
step count and MuJoCo's integration state: restoring one resets the task to that vector (only
when it changed) and then sets the rest, so steps replay exactly.
"""

from __future__ import annotations

import difflib
import importlib.util
from typing import ClassVar

import gymnasium as gym
import mujoco
import numpy as np

from prefrl.envs.backends import (
    FAST_RENDER_OFF,
    get_mujoco_state,
    prepare_offscreen,
    set_mujoco_state,
)

VERSION = "3.1.1"
INSTALL = (
    f"the MetaWorld tasks need metaworld {VERSION}, installed without its MuJoCo pin (it asks "
    f"for MuJoCo 3.3.0; prefrl runs it on 3.17): pip install --no-deps metaworld=={VERSION} "
    "packaging"
)
EPISODE_STEPS = 200
"""RFCL's episodes on MetaWorld (MetaWorld's own limit is 500)."""

TASKS = (
    "assembly", "basketball", "bin-picking", "box-close", "button-press-topdown",
    "button-press-topdown-wall", "button-press", "button-press-wall", "coffee-button",
    "coffee-pull", "coffee-push", "dial-turn", "disassemble", "door-close", "door-lock",
    "door-open", "door-unlock", "hand-insert", "drawer-close", "drawer-open", "faucet-open",
    "faucet-close", "hammer", "handle-press-side", "handle-press", "handle-pull-side",
    "handle-pull", "lever-pull", "pick-place-wall", "pick-out-of-hole", "pick-place",
    "plate-slide", "plate-slide-side", "plate-slide-back", "plate-slide-back-side",
    "peg-insert-side", "peg-unplug-side", "soccer", "stick-push", "stick-pull", "push",
    "push-wall", "push-back", "reach", "reach-wall", "shelf-place", "sweep-into", "sweep",
    "window-open", "window-close",
)  # fmt: skip
"""MetaWorld's 50 v3 tasks, by their names without the version."""

DIFFERS: dict[str, str] = {
    "coffee-pull": "resets with the mug turned (a quaternion component off by 0.03, ~3 degrees)",
    "coffee-push": "resets with the mug turned (a quaternion component off by 0.03, ~3 degrees)",
    "disassemble": "resets with the object 1.4 cm away in y",
    "door-close": "resets with the hand 1.5 mm away in y, and one step moves the door 5.6 mm "
    "further in x",
    "hand-insert": "moves the object 2.5 mm further in z in one step",
    "shelf-place": "lets MetaWorld's scripted policy succeed from 6 of 10 resets (10 of 10 "
    "on 3.3.0)",
}
"""Tasks that do not behave on MuJoCo 3.17 as on MetaWorld's own 3.3.0, and how they differ
(`python tools/metaworld_check.py`, benchmarks/results/metaworld_check.json)."""

CAMERA = ((0.0, 0.65, 0.15), 1.5, 140.0, -25.0)
"""(point looked at, distance, azimuth, elevation): the table, the arm and the objects."""


def check(name: str) -> None:
    """Refuse a name that is no MetaWorld v3 task (with the closest) or one that differs."""
    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=4, cutoff=0.5)
        hint = f"; closest: {', '.join('metaworld:' + c for c in close)}" if close else ""
        raise ValueError(
            f"unknown MetaWorld task {name!r} (its v3 tasks are named without the version, "
            f"e.g. metaworld:door-open){hint}"
        )
    if name in DIFFERS:
        raise ValueError(
            f"metaworld:{name} is not shipped: on MuJoCo 3.17 it behaves unlike MetaWorld on the "
            f"3.3.0 it pins: it {DIFFERS[name]} (tools/metaworld_check.py; the other 44 agree)"
        )


def _import_metaworld():
    try:
        import metaworld.sawyer_xyz_env as sawyer
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
    except ImportError as e:
        raise ImportError(INSTALL) from e
    sawyer.SawyerMocapBase.reset_mocap_welds = _pad_welds
    return ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE


def _pad_welds(self) -> None:
    """MetaWorld's weld reset (no offset, the mocap's frame turned, torque scale 5) written into
    the first 11 numbers of each weld, however many the MuJoCo in use has."""
    model = self.model
    for i in range(model.neq):
        if model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
            model.eq_data[i, :11] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)


def make_metaworld_base(name: str, seed: int = 0):
    """MetaWorld's own goal-observable env of a task (weld reset padded), drawing a new
    placement at each reset from its seeded generator."""
    classes = _import_metaworld()
    base = classes[f"{name}-v3-goal-observable"](seed=seed)
    base._freeze_rand_vec = False
    base.seeded_rand_vec = True
    return base


def scripted_policy(name: str):
    """MetaWorld's own scripted policy of a task (`metaworld.policies`): `get_action(obs)`."""
    import warnings

    _import_metaworld()
    from metaworld import policies

    # (Its note, at every action, that some of its gains may be too high for actions in [-1, 1].)
    warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")

    title = name.title().replace("-", "").replace("PegInsert", "PegInsertion")
    return getattr(policies, f"Sawyer{title}V3Policy")()


class MetaWorldTask(gym.Env):
    """One MetaWorld task with prefrl's state save/restore (`get_state`, `set_state`,
    `observe`) and rendering."""

    # (80 frames a second: a step is 5 substeps of 2.5 ms)
    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 80}

    def __init__(self, name: str, width: int = 256, height: int = 256, fast: bool = True,
                 render: bool = False):  # fmt: skip
        self.task = name
        self.mw = make_metaworld_base(name)
        self.observation_space = self.mw.observation_space
        self.action_space = self.mw.action_space
        self._obs = self.mw._get_obs()
        self._vec_size = len(self.mw._last_rand_vec)
        self._size, self._fast = (height, width), fast
        self._renderer = None
        if render:
            prepare_offscreen(self.mw.model, width, height, fast)

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.mw.seed(seed)
        self._obs, info = self.mw.reset()
        return self._obs.copy(), {**info, "success": False}

    def step(self, action):
        obs, reward, _, _, info = self.mw.step(np.asarray(action, np.float32))
        self._obs = obs
        return obs.copy(), float(reward), False, False, {**info, "success": bool(info["success"])}

    def get_state(self) -> np.ndarray:
        mw = self.mw
        return np.concatenate([
            np.asarray(mw._last_rand_vec, np.float64), self._obs[18:36], [mw.curr_path_length],
            get_mujoco_state(mw.model, mw.data),
        ])  # fmt: skip

    def set_state(self, state: np.ndarray) -> None:
        mw, n = self.mw, self._vec_size
        state = np.asarray(state, np.float64).reshape(-1)
        vec, previous, steps, sim = state[:n], state[n : n + 18], state[n + 18], state[n + 19 :]
        if not np.array_equal(vec, mw._last_rand_vec):
            mw._last_rand_vec, mw._freeze_rand_vec = vec.copy(), True
            try:
                mw.reset()
            finally:
                mw._freeze_rand_vec = False
        set_mujoco_state(mw.model, mw.data, sim)
        mw.curr_path_length = int(steps)
        current = mw._get_curr_obs_combined_no_goal()
        mw._prev_obs = current
        obs = np.hstack([current, previous, mw._get_pos_goal()])
        space = mw.sawyer_observation_space
        self._obs = np.clip(obs, space.low, space.high)

    def observe(self) -> np.ndarray:
        return self._obs.copy()

    def render(self) -> np.ndarray:
        if self._renderer is None:
            height, width = self._size
            self._renderer = mujoco.Renderer(self.mw.model, height=height, width=width)
            if self._fast:
                for flag in FAST_RENDER_OFF:
                    self._renderer.scene.flags[flag] = 0
            self._camera = mujoco.MjvCamera()
            mujoco.mjv_defaultFreeCamera(self.mw.model, self._camera)
            lookat, distance, azimuth, elevation = CAMERA
            self._camera.lookat[:] = lookat
            self._camera.distance, self._camera.azimuth = distance, azimuth
            self._camera.elevation = elevation
        self._renderer.update_scene(self.mw.data, camera=self._camera)
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def ids() -> list[str]:
    return [f"metaworld:{name}" for name in TASKS if name not in DIFFERS]


def installed() -> bool:
    return importlib.util.find_spec("metaworld") is not None


def make(name: str, width: int, height: int, fast: bool, render: bool):
    from prefrl.envs.backends import NativeBackend

    env = gym.wrappers.TimeLimit(
        MetaWorldTask(name, width, height, fast, render), max_episode_steps=EPISODE_STEPS
    )
    return env, NativeBackend(env)
