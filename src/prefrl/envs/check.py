"""What an env supports for prefrl's workflows (`check_env`), and the refusals of workflows that
need what it lacks, naming the env and why."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from prefrl.envs.backends import (
    ClassicControlBackend,
    DmcBackend,
    GymMujocoBackend,
    NativeBackend,
)
from prefrl.envs.given import GivenEnv
from prefrl.envs.objects import qualified_id
from prefrl.envs.registry import RenderSettings, backend_for, is_pixel_env, make_env
from prefrl.envs.wrapper import NO_TIME_LIMIT, PrefrlEnv, flatten_observation, time_limit

ADD_STATE = (
    "give its class get_state() (a flat float array of everything its step reads), "
    "set_state(state) (puts that back) and observe() (the observation of the current state); "
    "MuJoCo envs (an `unwrapped` with a mujoco.MjModel `model` and its `data`) prefrl restores "
    "itself"
)


@dataclasses.dataclass(frozen=True)
class EnvReport:
    """What an env supports (`prefrl.check_env`): each as a bool, and in `why` (by the same
    names) what it is or why it is not. `str(report)` reads as a table."""

    env: str
    """The env: its id, or its class's name for an env object that was never registered."""
    continuous_actions: bool
    """A bounded Box action space: what prefrl's state-based agents (SAC, PPO) act in."""
    restorable_state: bool
    """prefrl can save and restore its state: people labelling replay clips from saved states;
    RFCL starts episodes from demo states."""
    rendering: bool
    """It renders RGB frames: evaluation videos, and the clips people label."""
    success_flag: bool
    """Its steps report `info["success"]`: success rates in evaluations, RFCL's reward."""
    copyable: bool
    """prefrl can make more of it (by its id, or copies of the object) for evaluation."""
    why: dict[str, str]
    """For each of the above, by its name: what it is, or why not (and how to add it)."""
    given: bool = False
    """An env object that was never registered (no id: the CLI and other processes cannot make
    it; people cannot label it; RFCL, which takes an id, cannot learn it)."""
    time_limit: bool = True
    """Its episodes end by a time limit (a TimeLimit wrapper, or the env's own): evaluations
    end. The learners refuse an env object of yours without one."""

    @property
    def learners(self) -> str:
        """Which of prefrl's learners take it, and what the others need."""
        if not self.continuous_actions:
            return "prefrl's state-based learners need continuous actions"
        if not self.copyable:
            return "the learners refuse it until it can be copied"
        if not self.time_limit:
            return "the learners refuse it until it has a time limit"
        people = [n for n, ok in (("restorable state", self.restorable_state),
                                  ("rendering", self.rendering)) if not ok]  # fmt: skip
        rfcl = [n for n, ok in (("restorable state", self.restorable_state),
                                ("a success flag", self.success_flag)) if not ok]  # fmt: skip
        if self.given:  # (both make the env by its id, in processes of their own)
            people.append("an id (gymnasium.register)")
            rfcl.append("an id (gymnasium.register)")
        return "; ".join([
            "RLLearner and PreferenceLearner (scripted teachers and your own) train on it",
            f"a person labelling it needs {' and '.join(people)}" if people
            else "people can label it (teacher='web' or 'terminal')",
            f"RFCL needs {' and '.join(rfcl)}" if rfcl else "RFCL can learn it from demos",
        ])  # fmt: skip

    def __str__(self) -> str:
        rows = [(label, getattr(self, name), self.why[name]) for name, label in _ROWS]
        width = max(len(label) for label, _, _ in rows) + 1
        lines = [self.env] + [f"  {label + ':':<{width}} {'yes' if ok else 'no'}: {why}"
                              for label, ok, why in rows]  # fmt: skip
        return "\n".join([*lines, f"  {self.learners}"])


_ROWS = (
    ("continuous_actions", "continuous actions"),
    ("restorable_state", "restorable state"),
    ("rendering", "rendering"),
    ("success_flag", "success flag"),
    ("copyable", "copies"),
    ("time_limit", "time limit"),
)


def check_env(env: str | gym.Env) -> EnvReport:
    """What `env` supports for prefrl (continuous actions, restorable state, rendering, a success
    flag, copies), each with why or why not: `print(prefrl.check_env(MyEnv()))`.

    `env`: an env id (`prefrl envs`, Gymnasium's own included), an env made by
    `prefrl.make_env` or `gymnasium.make`, or an instance of your own class. It is probed on an
    env of its own (made by the id, or a copy of your object): reset, rendered, stepped once,
    its state saved and restored; your object is never stepped. Prints nothing."""
    if isinstance(env, str):
        return _check_id(env)
    if isinstance(env, PrefrlEnv):
        return _check_id(env.env_id) if env.given is None else _check_given(env.given, env)
    if not isinstance(env, gym.Env):
        raise TypeError(f"env={env!r} is not an env id or a gymnasium.Env object")
    spec = getattr(env, "spec", None)
    if spec is not None and spec.id in gym.registry:
        return _check_id(qualified_id(spec))
    return _check_given(GivenEnv(env), env)


def _check_id(env_id: str) -> EnvReport:
    if is_pixel_env(env_id):
        return _pixels(env_id)
    try:
        made = make_env(env_id, seed=0, render=True)
    except ValueError as refused:  # (one of Gymnasium's own that prefrl does not drive: why)
        try:
            raw = gym.make(env_id, render_mode="rgb_array")
        except Exception:  # noqa: BLE001 (an id Gymnasium does not know either)
            raise refused from None
        backend = backend_for(raw, env_id, RenderSettings())
        return _probe(env_id, raw, backend, None, "made by its id", given=False)
    return _probe(env_id, made.env, made.backend, None, "made by its id", given=False, own=made)


def _check_given(given: GivenEnv, env: gym.Env) -> EnvReport:
    if given.copy_problem:
        continuous, actions = _actions(env.action_space)
        why = "not checked: check_env steps a copy, never your own object"
        return EnvReport(given.described, continuous, False, False, False, False,
                         {"continuous_actions": actions, "restorable_state": why,
                          "rendering": why, "success_flag": why,
                          "copyable": given.copy_problem, "time_limit": why},
                         given=True)  # fmt: skip
    probe = given.copy()
    backend = backend_for(probe, given.env_id, RenderSettings())
    mode = getattr(probe, "render_mode", None)
    no_frames = given.no_frames and (f"render_mode={mode!r}: make it with render_mode="
                                     "'rgb_array' (its render() returning an RGB array)")  # fmt: skip
    return _probe(given.described, probe, backend, no_frames,
                  "copies of the object as given (copy.deepcopy)", given=True)  # fmt: skip


def _actions(space) -> tuple[bool, str]:
    if not isinstance(space, gym.spaces.Box):
        return False, (f"{space} actions; prefrl's state-based agents act in continuous ones (a "
                       "Box space)")  # fmt: skip
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        return False, f"{space}: unbounded; prefrl's agents need finite bounds"
    return True, str(space)


def _probe(name: str, raw: gym.Env, backend, no_frames: str | None, copies: str, given: bool,
           own: PrefrlEnv | None = None) -> EnvReport:  # fmt: skip
    """Reset, render, save the state, step, restore it: what works, and why not."""
    why = {"copyable": copies}
    try:
        continuous, why["continuous_actions"] = _actions(raw.action_space)
        obs, info = raw.reset(seed=0)
        rendering, why["rendering"] = (False, no_frames) if no_frames else _renders(backend)
        saves = getattr(backend, "restores_state", True)
        state = backend.get_state() if saves else None
        raw.action_space.seed(0)
        step_info = raw.step(raw.action_space.sample())[-1]
        success = "success" in info or "success" in step_info
        why["success_flag"] = ('info["success"] in its steps' if success else
                               'no info["success"] (whether the task is solved) in its steps: '
                               "evaluations give no success rate; RFCL learns from it")  # fmt: skip
        if saves:
            restorable, why["restorable_state"] = _restores(backend, state, obs)
        else:
            restorable = False
            why["restorable_state"] = f"prefrl cannot save and restore it; to add that, {ADD_STATE}"
    finally:
        (own or raw).close()
    limit = time_limit(raw, backend)
    why["time_limit"] = f"{limit} steps an episode" if limit else NO_TIME_LIMIT
    return EnvReport(name, continuous, restorable, rendering, success, True, why, given,
                     limit is not None)  # fmt: skip


def _renders(backend) -> tuple[bool, str]:
    try:
        frame = np.asarray(backend.render())
    except Exception as e:  # noqa: BLE001 (whatever the env's own render() raises: said)
        return False, f"rendering failed: {type(e).__name__}: {e}"
    if frame.ndim != 3 or frame.shape[-1] != 3:
        return False, f"render() gave an array of shape {frame.shape}, not an RGB frame"
    return True, f"RGB frames of {frame.shape[1]}x{frame.shape[0]}"


_HOW = {
    GymMujocoBackend: "prefrl saves and restores its MuJoCo state exactly",
    DmcBackend: "prefrl saves and restores its MuJoCo state exactly",
    ClassicControlBackend: "prefrl saves and restores the state vector it keeps",
    NativeBackend: "through its own get_state(), set_state(state) and observe()",
}


def _restores(backend, state, first_obs) -> tuple[bool, str]:
    """Whether restoring the state saved after reset brings its observation back."""
    try:
        backend.set_state(state)
        back = flatten_observation(backend.observe())
    except Exception as e:  # noqa: BLE001 (the env's own set_state or observe: said)
        return False, f"restoring a saved state failed: {type(e).__name__}: {e}"
    first = flatten_observation(first_obs)
    if back.shape != first.shape or not np.allclose(back, first, atol=1e-5):
        return False, ("set_state(get_state()) does not bring back the observation of that "
                       "state: get_state() must hold everything its step reads")  # fmt: skip
    return True, _HOW.get(type(backend), "prefrl saves and restores its state")


def _pixels(env_id: str) -> EnvReport:
    """An env of frames (not made: an Atari ROM may be slow to load)."""
    why = {
        "continuous_actions": "an env of frames with discrete actions: prefrl frames (from "
        "preferences) and prefrl rl --algo a2c|ppo learn it",
        "restorable_state": "not needed: people label its stored frames (prefrl frames)",
        "rendering": "its frames are its observations",
        "success_flag": 'prefrl\'s envs of frames report no info["success"]',
        "copyable": "made by its id",
    }
    return EnvReport(env_id, False, False, True, False, True, why)


def require_restorable(env: PrefrlEnv, needs: str) -> None:
    """Refuse what needs `env`'s state saved and restored (`needs`: who needs it and why),
    naming the env and how an env gets that."""
    if not env.restores_state:
        raise ValueError(f"{described(env)} cannot restore a saved state: {needs}. To add "
                         f"that, {ADD_STATE}")  # fmt: skip


def check_people_can_label(env: PrefrlEnv) -> None:
    """A person labels clips replayed from saved states, rendered by a process of their own
    that makes the env by its id: refuse an env without either, naming it."""
    require_restorable(env, "a person labelling compares clips replayed from saved states; use a "
                       "scripted teacher or a teacher object of your own")  # fmt: skip
    if env.given is not None:
        raise ValueError(f"{described(env)}: the clips a person labels are rendered by a process "
                         "of their own, which makes the env by its id; register it with "
                         "gymnasium.register and pass its id (module:EnvId), or use a scripted "
                         "teacher or a teacher object of your own")  # fmt: skip


def described(env: PrefrlEnv) -> str:
    """The env as errors name it: its id and class, or its class for an env object given."""
    if env.given is not None:
        return env.given.described
    name = type(env.unwrapped).__name__
    return env.env_id if name.lower() in env.env_id.lower() else f"{env.env_id} ({name})"
