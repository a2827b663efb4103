"""Env objects a Python user gave prefrl that were never registered with Gymnasium.

Such an env has no id to make more of it by, so prefrl names it `instance:ClassName` and makes
more by copying it: `copy.deepcopy` of the object as it was given, taken when it was given
(evaluations and checks step the copies, never the user's own object). The name holds in the
process it was given in; a run of it resumes when it is given again (docs/design.md says why).
"""

from __future__ import annotations

import copy

import gymnasium as gym

from prefrl.envs.backends import is_mujoco_env

PREFIX = "instance:"


class GivenEnv:
    """A user's unregistered env object: its name and copies of it as it was given."""

    def __init__(self, env: gym.Env):
        self.class_name = type(env.unwrapped).__name__
        self.env_id = PREFIX + self.class_name
        try:
            self._original = copy.deepcopy(env)
            self.copy_error = None
        except Exception as e:  # noqa: BLE001 (any object it holds may refuse: said as it is)
            self._original, self.copy_error = None, f"{type(e).__name__}: {e}"

    @property
    def described(self) -> str:
        return f"{self.class_name} (an env object of yours, never registered with Gymnasium)"

    @property
    def copy_problem(self) -> str | None:
        """Why it cannot be copied (learners refuse it then), or None."""
        if self.copy_error is None:
            return None
        return (
            f"{self.described} cannot be copied with copy.deepcopy ({self.copy_error}); "
            "prefrl evaluates policies on copies of the env: make it copyable (e.g. open files, "
            "windows and connections at reset rather than in __init__, or give it a "
            "__deepcopy__), or register it with gymnasium.register and pass its id"
        )

    def copy(self) -> gym.Env:
        """A new copy of the env as it was given."""
        if self._original is None:
            raise TypeError(self.copy_problem)
        return copy.deepcopy(self._original)

    @property
    def no_frames(self) -> str | None:
        """Why its copies render no frames (no video of their evaluations), or None: one made
        with render_mode="rgb_array" renders through its own render(); MuJoCo envs prefrl
        renders itself."""
        if self._original is None or is_mujoco_env(self._original):
            return None
        if getattr(self._original, "render_mode", None) == "rgb_array":
            return None
        return (f"{self.described} renders no frames: make it with render_mode='rgb_array' "
                "(its render() returning an RGB array)")  # fmt: skip


_GIVEN: dict[str, GivenEnv] = {}
"""By name: the one given last (a run's own env keeps its own, `PrefrlEnv.given`)."""


def give(env: gym.Env) -> GivenEnv:
    """Take note of a user's env object (a copy of it as it is now), by its class's name."""
    given = GivenEnv(env)
    _GIVEN[given.env_id] = given
    return given


def given_names() -> list[str]:
    return [name[len(PREFIX) :] for name in _GIVEN]


def given_env(name: str) -> GivenEnv | None:
    """The env object given as `instance:name` in this process (None: not given)."""
    return _GIVEN.get(PREFIX + name)


def not_given(name: str) -> str:
    """What to do about an `instance:` id this process was not given (a run of it resumed in
    another process, or `prefrl` on its run directory)."""
    return (
        f"{PREFIX}{name} names an env object of a {name} class that was never registered with "
        "Gymnasium, and this process was not given it: prefrl cannot make one by itself. Give "
        f"the object again in Python (a run of it resumes as e.g. RLLearner({name}(...), "
        "resume='runs/NAME'); before a function that takes a run or a dataset of it, such as "
        f"collect_dataset, OfflineLearner or collect_rating_run, call prefrl.wrap_env({name}(...)) "
        "once), or register the class (gymnasium.register) and use its id, which every process "
        "can make (the prefrl command, prefrl eval, a labelling server)"
    )
