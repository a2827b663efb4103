"""Env objects of a Python user's as prefrl envs: one made by `gymnasium.make` (known by its
id), or an instance of their own class that was never registered (known by its class's name in
this process; more of it are copies, `envs.given`)."""

from __future__ import annotations

import gymnasium as gym

from prefrl.envs.given import give
from prefrl.envs.registry import (
    RenderSettings,
    _gym_kind,
    _make_given,
    backend_for,
    make_env,
    resolve,
)
from prefrl.envs.wrapper import NO_TIME_LIMIT, PrefrlEnv


def wrap_env(env: gym.Env, seed: int | None = 0) -> PrefrlEnv:
    """A Gymnasium env object of yours as prefrl's (flat observations, actions in [-1, 1]).

    One made by `gymnasium.make` is known by its id (`module:EnvId` for yours), which any
    process can make more of. Any other (an instance of your class, never registered) is known
    as `instance:ClassName` in this process, and more of it are copies (`copy.deepcopy`) of the
    object as it is now: evaluations run on those, and a run of it resumes when given it again.
    """
    spec = getattr(env, "spec", None)
    if spec is None or spec.id not in gym.registry:
        given = give(env)
        if given.copy_problem:
            raise TypeError(given.copy_problem)
        wrapped = PrefrlEnv(env, given.env_id, backend_for(env, given.env_id, None), seed)
        if wrapped.max_episode_steps is None:
            raise ValueError(f"env={given.described}: {NO_TIME_LIMIT}")
        wrapped.given = given
        return wrapped
    family, name = resolve(qualified_id(spec))
    if family != "gymnasium":
        raise TypeError(f"env={env!r}: pass its id {spec.id!r} instead")
    return PrefrlEnv(env, name, backend_for(env, name, None), seed)


def make_like(env: str | PrefrlEnv, seed: int | None = 0,
              render: bool | RenderSettings = False) -> PrefrlEnv:  # fmt: skip
    """Another env like `env` (an id, or an env object): made by its id, or a copy of the env
    object a Python user gave (`wrap_env`), even where another of its class was given since."""
    given = getattr(env, "given", None)
    if given is None:
        return make_env(env if isinstance(env, str) else env.env_id, seed, render)
    settings = RenderSettings() if render is True else (render or None)
    base, backend = _make_given(given.class_name, settings, given)
    return PrefrlEnv(base, given.env_id, backend, seed, render=settings is not None)


def qualified_id(spec) -> str:
    """A user env's id as `module:EnvId`, the module its entry point lives in (importing it
    registers the env, in the usual layout), so other processes and resumed runs find it too."""
    entry = spec.entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    if _gym_kind(spec) != "user" or not module or module == "__main__":
        return spec.id
    return f"{module}:{spec.id}"
