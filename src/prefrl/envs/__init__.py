"""Environment registry: Gymnasium MuJoCo ids, `dmc:domain-task`, built-in `toy:*` tasks."""

from prefrl.envs.check import EnvReport, check_env
from prefrl.envs.frames import FrameVectorEnv, PixelEnv
from prefrl.envs.learned_reward import LearnedReward
from prefrl.envs.objects import make_like, wrap_env
from prefrl.envs.registry import (
    RenderSettings,
    UnknownEnvError,
    can_disable_early_termination,
    is_pixel_env,
    known_env_ids,
    make_env,
    make_pixel_env,
)
from prefrl.envs.wrapper import PrefrlEnv

__all__ = [
    "EnvReport",
    "FrameVectorEnv",
    "LearnedReward",
    "PixelEnv",
    "PrefrlEnv",
    "RenderSettings",
    "UnknownEnvError",
    "can_disable_early_termination",
    "check_env",
    "is_pixel_env",
    "known_env_ids",
    "make_env",
    "make_like",
    "make_pixel_env",
    "wrap_env",
]
