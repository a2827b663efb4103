"""Named published settings (`--preset NAME`)."""

from __future__ import annotations

from dataclasses import dataclass

from prefrl.agents import SACConfig
from prefrl.loops.rl import RLConfig


@dataclass(frozen=True)
class Preset:
    description: str
    config: RLConfig


RL_PRESETS: dict[str, Preset] = {
    "quickstart": Preset(
        "a one-minute SAC run that swings up Pendulum-v1 and ends with a video",
        RLConfig(
            env="Pendulum-v1",
            steps=6_000,
            warmstart_steps=1_000,
            eval_interval=1_000,
            eval_episodes=5,
            video_interval=6_000,
            checkpoint_interval=3_000,
            buffer_size=100_000,
        ),
    ),
    "sac-mujoco": Preset(
        "SAC paper settings on Gymnasium MuJoCo (2x256, lr 3e-4, batch 256, tau 0.005, "
        "10k random steps)",
        RLConfig(env="HalfCheetah-v5", steps=1_000_000, warmstart_steps=10_000, agent=SACConfig()),
    ),
    "droq-mujoco": Preset(
        "DroQ (Hiraoka et al. 2022): update-to-data 20, critic dropout 0.01 + layer norm",
        RLConfig(
            env="Hopper-v5",
            steps=300_000,
            warmstart_steps=5_000,
            agent=SACConfig(utd_ratio=20, critic_dropout=0.01, critic_layer_norm=True),
        ),
    ),
}
