"""One `make_env` for every family of environments prefrl knows."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from prefrl.envs.backends import (
    ClassicControlBackend,
    DmcBackend,
    GymMujocoBackend,
    NativeBackend,
    OpaqueBackend,
    is_mujoco_env,
    is_native_env,
    prepare_offscreen,
)
from prefrl.envs.frames import PixelEnv
from prefrl.envs.given import PREFIX, GivenEnv, given_env, given_names, not_given
from prefrl.envs.maze import LAYOUTS, PointMaze
from prefrl.envs.toy import PointFree, PointReach
from prefrl.envs.wrapper import STATE_ENVS, PrefrlEnv, check_action_space


class UnknownEnvError(ValueError):
    """An environment id that no family recognises."""


@dataclass(frozen=True)
class RenderSettings:
    width: int = 256
    height: int = 256
    fast: bool = True
    """No shadows, reflections, skybox, haze or multisampling: about 4x faster than MuJoCo's
    default quality on the CPU (benchmarks/clip_render.py)."""
    camera_id: int = 0
    """dm_control camera id; Gymnasium MuJoCo envs use a camera that follows moving robots."""


@dataclass(frozen=True)
class Family:
    description: str
    ids: Callable[[], list[str]]
    make: Callable[[str, RenderSettings | None], tuple[gym.Env, object]]
    check: Callable[[str], None] | None = None
    """Validates a name beyond the listed ids (raises ValueError); None: listed ids only."""
    missing: Callable[[], str | None] = lambda: None
    """What to install before its envs can be made (None: nothing)."""


_TOY = {
    "point-reach": PointReach,
    "point-free": PointFree,
    **{("maze" if layout == "u" else f"maze-{layout}"): partial(PointMaze, layout)
       for layout in LAYOUTS},
}  # fmt: skip


def _toy_ids() -> list[str]:
    return [f"toy:{name}" for name in _TOY]


def _make_toy(name: str, render: RenderSettings | None):
    kwargs = (
        {}
        if render is None
        else {"render_mode": "rgb_array", "width": render.width, "height": render.height}
    )
    task = _TOY[name](**kwargs)
    env = gym.wrappers.TimeLimit(task, task.max_steps)
    return env, NativeBackend(env)


def _dmc_ids() -> list[str]:
    from dm_control import suite

    return [f"dmc:{domain}-{task}" for domain, task in suite.ALL_TASKS]


def _make_dmc(name: str, render: RenderSettings | None):
    from dm_control import suite
    from shimmy.dm_control_compatibility import DmControlCompatibilityV0

    domain, task = name.split("-", 1)
    dm_env = suite.load(domain, task.replace("-", "_"))
    if render is not None:
        prepare_offscreen(dm_env.physics.model.ptr, render.width, render.height, render.fast)
    env = DmControlCompatibilityV0(dm_env, render_mode="rgb_array" if render else None)
    settings = render or RenderSettings()
    return env, DmcBackend(env, settings.width, settings.height, settings.camera_id, settings.fast)


def _gym_ids() -> list[str]:
    return sorted(i for i, spec in gym.registry.items() if _gym_kind(spec) is not None)


# Classic-control tasks with continuous actions (the others are discrete).
_CLASSIC_CONTINUOUS = ("Pendulum", "MountainCarContinuous")


def _gym_kind(spec) -> str | None:
    """mujoco, classic (continuous classic control), user (an env registered by its user, not
    one of Gymnasium's own), or None: one of Gymnasium's own that prefrl cannot drive."""
    entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
    if entry.startswith("gymnasium.envs.mujoco"):
        return "mujoco"
    if entry.startswith("gymnasium.envs.classic_control") and spec.name in _CLASSIC_CONTINUOUS:
        return "classic"
    if entry.startswith(("gymnasium.", "gymnasium_robotics.", "ale_py.", "shimmy.")):
        return None
    return "user"


def _spec(name: str):
    """Gymnasium's spec of an id, `module:EnvId` too (the module imported first)."""
    module, _, env_name = name.rpartition(":")
    if module and _importable(module):
        importlib.import_module(module)
    return gym.spec(env_name)


_TERMINATION_SWITCH = "terminate_when_unhealthy"


def _make_gym(name: str, render: RenderSettings | None, **kwargs):
    kind = _gym_kind(_spec(name))
    if kind is None:
        raise UnknownEnvError(
            f"{name!r} is a Gymnasium environment prefrl cannot drive: it needs continuous "
            "actions and a state it can save and restore (Gymnasium MuJoCo and continuous "
            "classic-control ids, dmc:*, toy:*)"
        )
    settings = render or RenderSettings()
    if kind == "classic":
        env = gym.make(name, render_mode="rgb_array" if render else None)
        return env, ClassicControlBackend(env, settings.width, settings.height)
    if kind == "user":  # (a MuJoCo one is rendered and restored as Gymnasium's own are)
        env = gym.make(name, **kwargs, **({"render_mode": "rgb_array"} if render else {}))
        return env, backend_for(env, name, render)
    env = gym.make(name, **kwargs)  # prefrl renders MuJoCo envs itself (see GymMujocoBackend)
    if render is not None:
        prepare_offscreen(env.unwrapped.model, settings.width, settings.height, settings.fast)
    return env, GymMujocoBackend(env, settings.width, settings.height, settings.fast)


def backend_for(env: gym.Env, name: str, render: RenderSettings | None):
    """The backend of a Gymnasium env made outside `make_env`: MuJoCo ones save, restore and
    render their state exactly; one with `get_state()`, `set_state(state)` and `observe()` of
    its own, through those; others run without state restore (`OpaqueBackend`)."""
    if is_mujoco_env(env):
        settings = render or RenderSettings()
        if render is not None:
            prepare_offscreen(env.unwrapped.model, settings.width, settings.height, settings.fast)
        return GymMujocoBackend(env, settings.width, settings.height, settings.fast)
    if _is_classic(env):
        settings = render or RenderSettings()
        return ClassicControlBackend(env, settings.width, settings.height)
    if is_native_env(env):
        return NativeBackend(env)
    return OpaqueBackend(env, name)


def _is_classic(env: gym.Env) -> bool:
    """One of Gymnasium's continuous classic-control tasks, by id or an object made directly."""
    if env.spec is not None:
        return _gym_kind(env.spec) == "classic"
    cls = type(env.unwrapped)
    return cls.__module__.startswith("gymnasium.envs.classic_control") and cls.__name__ in (
        "PendulumEnv", "Continuous_MountainCarEnv")  # fmt: skip


def _check_given(name: str) -> None:
    if given_env(name) is None:
        raise UnknownEnvError(not_given(name))


def _make_given(name: str, render: RenderSettings | None, given: GivenEnv | None = None):
    """A copy of an env object given in Python (`given`, or the one given last by that name)."""
    given = given or given_env(name)
    env = given.copy()
    if render is not None and given.no_frames:
        env.close()
        raise ValueError(given.no_frames)
    return env, backend_for(env, given.env_id, render)


def _suite(module: str, description: str, checks: bool = False) -> Family:
    """The family of a suite in its own module, `prefrl.envs.<module>`, imported on first use
    (it may need an extra): its `ids()`, `make(name, width, height, fast, render)` and, with
    `checks`, `check(name)` for names beyond the listed ids; `installed()` and `INSTALL`, what
    to install where it says False."""

    def suite():
        return importlib.import_module(f"prefrl.envs.{module}")

    def make(name: str, render: RenderSettings | None):
        s = render or RenderSettings()
        return suite().make(name, s.width, s.height, s.fast, render is not None)

    def missing() -> str | None:
        return None if suite().installed() else suite().INSTALL

    return Family(description, lambda: suite().ids(), make,
                  (lambda name: suite().check(name)) if checks else None, missing)  # fmt: skip


def _make_sparse(name: str, render: RenderSettings | None):
    from prefrl.envs.pusher import PusherSuccess

    env, backend = _make_gym("Pusher-v5", render)
    return PusherSuccess(env), backend


FAMILIES: dict[str, Family] = {
    "toy": Family(
        "built-in tasks, e.g. toy:point-reach, toy:maze (sparse success)", _toy_ids, _make_toy
    ),
    "dmc": Family("DeepMind Control suite, e.g. dmc:walker-walk", _dmc_ids, _make_dmc),
    "gymnasium": Family(
        "Gymnasium MuJoCo and continuous classic-control ids, e.g. Hopper-v5, Pendulum-v1",
        _gym_ids,
        _make_gym,
    ),
    "adroit": _suite(
        "adroit",
        "Adroit hand tasks with a sparse success (prefrl[adroit]): adroit:door, adroit:pen, "
        "adroit:hammer, adroit:relocate; each with a shaped reward as adroit:<task>-dense",
    ),
    "metaworld": _suite(
        "metaworld",
        "MetaWorld's v3 Sawyer tasks, goal observable, with a success flag (metaworld 3.1.1 "
        "installed without its MuJoCo pin), e.g. metaworld:door-open, metaworld:stick-pull",
        checks=True,
    ),
    "sparse": Family(
        "Gymnasium MuJoCo tasks with a sparse success: sparse:pusher (object within 5 cm of the "
        "goal)",
        lambda: ["sparse:pusher"],
        _make_sparse,
    ),
    "instance": Family(
        "env objects given in Python, never registered with Gymnasium (by their class's name, "
        "in the process given them), e.g. instance:MyEnv",
        lambda: [PREFIX + name for name in given_names()],
        _make_given,
        _check_given,
    ),
    "robopianist": _suite(
        "piano",
        "RoboPianist (prefrl[piano]): a bundled song or a MIDI file, then task flags, e.g. "
        "'robopianist:debug-TwinkleTwinkleRousseau', 'robopianist:tune.mid --stretch 2'",
        checks=True,
    ),
}


def _known_ids() -> list[str]:
    return [i for fam in FAMILIES.values() for i in fam.ids()]


def _unknown(env_id: str, why: str, family: str | None = None) -> UnknownEnvError:
    """The error for an id nothing makes: the family it names (all of them when it names none)
    and the closest known ids."""
    if family is None:
        known = "Known families: " + "; ".join(f"{k}: {f.description}" for k, f in FAMILIES.items())
    else:
        known = f"{family}: {FAMILIES[family].description}"
    close = difflib.get_close_matches(env_id, _known_ids(), n=5, cutoff=0.5)
    hint = f" Closest matches: {', '.join(close)}." if close else ""
    return UnknownEnvError(f"unknown environment {env_id!r} ({why}). {known}.{hint}")


def _unsupported(env_id: str) -> UnknownEnvError:
    """One of Gymnasium's own envs that prefrl cannot drive: what it has (its action space, read
    from an env made for the purpose), and what prefrl needs."""
    try:
        env = gym.make(env_id.split(":", 1)[-1])
        space = env.action_space
        env.close()
    except Exception:  # noqa: BLE001 (e.g. Box2D is not installed: said without the space)
        return UnknownEnvError(
            f"{env_id!r} is not an env prefrl can drive: it needs continuous actions (a Box "
            f"space) and a state it can save and restore, as in {STATE_ENVS}"
        )
    try:
        check_action_space(env_id, space)
    except ValueError as e:
        return UnknownEnvError(str(e))
    return UnknownEnvError(
        f"{env_id!r} has continuous actions, but prefrl cannot save and restore its state (clips "
        f"are rendered from saved states); it can in {STATE_ENVS}"
    )


def is_pixel_env(env_id: str) -> bool:
    """Whether `env_id` names an env of frames and discrete actions: `movingdot`, `atari:Game`."""
    return env_id == "movingdot" or env_id.startswith("atari:")


def make_pixel_env(env_id: str, seed: int | None = 0) -> PixelEnv:
    """A pixel env (stacked 84x84 grey frames, discrete actions) by id: `movingdot` (built in)
    or `atari:Pong`, `atari:Enduro`, ... (prefrl[atari])."""
    if env_id == "movingdot":
        from prefrl.envs.movingdot import EPISODE_FRAMES, MovingDotGame

        return PixelEnv(MovingDotGame(), env_id, seed, noop_max=0,
                        max_episode_steps=EPISODE_FRAMES // 4)  # fmt: skip
    if env_id.startswith("atari:"):
        from prefrl.envs.atari import make_atari

        return make_atari(env_id.split(":", 1)[1], seed)
    raise _unknown(env_id, "not a pixel env: movingdot or atari:Game (e.g. atari:Pong)")


def resolve(env_id: str) -> tuple[str, str]:
    """Split an id into (family, name) or raise UnknownEnvError."""
    if is_pixel_env(env_id):
        raise UnknownEnvError(
            f"{env_id!r} is an env of frames and discrete actions: learn it from preferences "
            "with prefrl frames (a reward CNN), or from its reward with prefrl rl --algo a2c|ppo; "
            "SAC, the MLP reward models and the state-based workflows do not take frames"
        )
    if ":" in env_id:
        prefix, name = env_id.split(":", 1)
        if prefix not in FAMILIES and _importable(prefix):
            return _resolve_module_id(env_id)  # module:EnvId (Gymnasium's own form)
        if prefix not in FAMILIES or prefix == "gymnasium":  # Gymnasium ids have no prefix
            raise _unknown(
                env_id,
                f"no family {prefix!r}, nor a module of that name to import "
                "(your env's module: run prefrl where it is, or put it on PYTHONPATH)",
            )
        if FAMILIES[prefix].check is not None:
            try:
                FAMILIES[prefix].check(name)
            except UnknownEnvError:
                raise
            except ValueError as e:
                raise UnknownEnvError(str(e)) from None
        elif env_id not in FAMILIES[prefix].ids():
            raise _unknown(env_id, f"no such {prefix} task", family=prefix)
        return prefix, name
    if env_id not in gym.registry:
        raise _unknown(env_id, "not a Gymnasium id")
    if _gym_kind(gym.spec(env_id)) is None:
        raise _unsupported(env_id)
    return "gymnasium", env_id


def _importable(module: str) -> bool:
    """Whether `module` can be imported, looking in the working directory too, as `python -m`
    does (the `prefrl` script alone would not: a user's env module sits where they work)."""
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.util.find_spec(top) is not None


def _resolve_module_id(env_id: str) -> tuple[str, str]:
    """`package.module:EnvId`: a Gymnasium env that the module registers when imported (as in
    `gymnasium.make`), so the id works in every process prefrl starts."""
    module, name = env_id.split(":", 1)
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise _unknown(env_id, f"its module cannot be imported: {e}") from None
    if name not in gym.registry:
        raise _unknown(env_id, f"{module} registers no {name!r} with gymnasium.register")
    if _gym_kind(_spec(env_id)) is None:
        raise _unsupported(env_id)
    return "gymnasium", env_id


def can_disable_early_termination(env_id: str) -> bool:
    """Whether `env_id` ends episodes when the robot falls and can be told not to (Gymnasium's
    Hopper, Walker2d, Ant and Humanoid: `terminate_when_unhealthy`)."""
    family, name = resolve(env_id)
    if family != "gymnasium":
        return False
    entry = _spec(name).entry_point
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    try:
        return _TERMINATION_SWITCH in inspect.signature(creator).parameters
    except (TypeError, ValueError):  # (a callable without a signature)
        return False


def make_env(
    env_id: str,
    seed: int | None = 0,
    render: bool | RenderSettings = False,
    early_termination: bool = True,
) -> PrefrlEnv:
    """Make an environment by id: `Hopper-v5`, `dmc:walker-walk`, `toy:point-reach`, ...

    `render=True` (or a RenderSettings) enables `env.render()` -> RGB array, offscreen with
    MUJOCO_GL=egl by default. `early_termination=False` lets a fallen robot go on to the time
    limit (only where `can_disable_early_termination`); the task reward is unchanged, so a
    fallen robot earns no alive bonus.
    """
    family, name = resolve(env_id)
    settings = RenderSettings() if render is True else (render or None)
    if early_termination:
        env, backend = FAMILIES[family].make(name, settings)
    elif can_disable_early_termination(env_id):
        env, backend = _make_gym(name, settings, **{_TERMINATION_SWITCH: False})
    else:
        raise ValueError(
            f"{env_id} has no switch for early termination (it either never ends an episode "
            "early, or ends it without one); early_termination=False is accepted for Gymnasium "
            "Hopper, Walker2d, Ant and Humanoid"
        )
    made = PrefrlEnv(env, env_id, backend, seed, render=settings is not None)
    made.given = given_env(name) if family == "instance" else None
    return made


def known_env_ids(family: str | None = None) -> list[str]:
    if family is None:
        return _known_ids()
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[family].ids()
