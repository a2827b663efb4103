"""Named published settings (`--preset NAME`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from prefrl.agents import SACConfig
from prefrl.agents.a2c import A2CConfig
from prefrl.agents.iql import IQL_PRESETS
from prefrl.demos.rfcl_config import RFCL_SAC, RFCLConfig
from prefrl.feedback import ScheduleConfig
from prefrl.offline.learner import OfflineConfig
from prefrl.online.learner import OnlineConfig
from prefrl.pixels.preferences import FramePreferenceConfig
from prefrl.reward import RewardConfig
from prefrl.reward.frames import FrameRewardConfig
from prefrl.rl.config import RLConfig

Config = RLConfig | OnlineConfig | OfflineConfig | RFCLConfig | FramePreferenceConfig


@dataclass(frozen=True)
class Preset:
    description: str
    settings: Config | Callable[[], Config]
    """The config, or a function that makes it where making it is slow (a piano preset checks
    its song, which imports robopianist's suite: a second on every command otherwise)."""

    @cached_property
    def config(self) -> Config:
        return self.settings() if callable(self.settings) else self.settings


# RoboPianist (Zakka et al. 2023), its README's SAC command.
_PIANO_SAC = SACConfig(
    hidden_dims=(256, 256, 256), discount=0.8, critic_dropout=0.01, critic_layer_norm=True
)

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
        RLConfig(env="HalfCheetah-v5", steps=1_000_000, warmstart_steps=10_000, sac=SACConfig()),
    ),
    "droq-mujoco": Preset(
        "DroQ (Hiraoka et al. 2022): update-to-data 20, critic dropout 0.01 + layer norm",
        RLConfig(
            env="Hopper-v5",
            steps=300_000,
            warmstart_steps=5_000,
            sac=SACConfig(utd_ratio=20, critic_dropout=0.01, critic_layer_norm=True),
        ),
    ),
    "robopianist-sac": Preset(
        "RoboPianist's published SAC run (GPU): 5M steps, 5k random, discount 0.8, 3x256 with "
        "critic dropout 0.01 + layer norm, eval every 30k; the task settings are the "
        "robopianist: ids' defaults",
        lambda: RLConfig(
            env="robopianist:debug-TwinkleTwinkleRousseau",
            steps=5_000_000,
            warmstart_steps=5_000,
            eval_interval=30_000,
            eval_episodes=1,
            video_interval=1_000_000,
            checkpoint_interval=100_000,
            sac=_PIANO_SAC,
        ),
    ),
    "robopianist-debug": Preset(
        "the published piano SAC, shortened to show learning on a CPU within an hour: "
        "Twinkle Twinkle (debug song), 60k steps, eval every 5k",
        lambda: RLConfig(
            env="robopianist:debug-TwinkleTwinkleRousseau",
            steps=60_000,
            warmstart_steps=5_000,
            eval_interval=5_000,
            eval_episodes=1,
            video_interval=60_000,
            checkpoint_interval=10_000,
            buffer_size=100_000,
            sac=_PIANO_SAC,
        ),
    ),
}


# Christiano et al. (2017): reward net 2x64 leaky ReLU, normalised output; a quarter of the labels
# from the random policy, then a rate decaying as 2e6 / (t + 2e6); clips of 1.5 s.
_CHRISTIANO_REWARD = RewardConfig(hidden_dims=(64, 64), output="linear")

# PEBBLE (Lee et al. 2021) on walker-walk with B-Pref's SAC; the schedule (50 per session).
_PEBBLE_WALKER = OnlineConfig(
    env="dmc:walker-walk",
    steps=500_000,
    warmstart_steps=1_000,
    unsupervised_steps=9_000,
    schedule=ScheduleConfig(kind="sessions", budget=1000, session_size=50, interval=20_000),
    sac=SACConfig(
        hidden_dims=(1024, 1024),
        actor_lr=5e-4,
        critic_lr=5e-4,
        temperature_lr=1e-4,
        batch_size=1024,
        init_temperature=0.1,
        tau=0.005,
    ),
)

# QPA (Hu et al., ICLR 2024, on B-Pref): queries among the last 10 episodes' segments, half of
# every SAC batch from those episodes, each labelled pair trained on as 20 crops 5-15 steps
# shorter; one reward network fitted on every label (up to 2000 epochs, stopping at 97% train
# accuracy); sessions of 10 labels every 20k steps after 1k random and 9k unsupervised steps.
QPA_PARTS = {
    "selection": "policy-aligned",
    "recent_steps": 10_000,
    "hybrid_replay": 0.5,
    "reward": RewardConfig(
        members=1,
        bootstrap=False,
        val_fraction=0.0,
        max_epochs=2000,
        crops=20,
        crop_shorter_by=(5, 15),
    ),
}
"""What QPA changes in PEBBLE (`--selection`, `--recent-steps`, `--hybrid-replay`, the reward
model), for any schedule."""
QPA_CODE = {
    **QPA_PARTS,
    "hybrid_replay_until_budget": True,
    "reward": dataclasses.replace(QPA_PARTS["reward"], normalize=False, random_response=0.0),
}
"""QPA_PARTS with the rules of QPA's code where prefrl's defaults differ (train_QPA.py,
reward_model.py): hybrid batches only while labels are asked; the agent's reward is the
network's raw tanh output (not normalised per fit), fitted by plain cross-entropy (no 10% of
random answers mixed into P, Christiano's)."""
_QPA = {
    **QPA_CODE,
    "schedule": ScheduleConfig(kind="sessions", budget=100, session_size=10, interval=20_000),
}


ONLINE_PRESETS: dict[str, Preset] = {
    "quickstart": Preset(
        "a two-minute preference run: Pendulum-v1 from 200 scripted (Oracle) labels",
        OnlineConfig(
            env="Pendulum-v1",
            steps=10_000,
            warmstart_steps=1_000,
            schedule=ScheduleConfig(budget=200, session_size=20, interval=1_000),
            reward=_CHRISTIANO_REWARD,
            eval_interval=2_000,
            eval_episodes=5,
            video_interval=10_000,
            checkpoint_interval=5_000,
            buffer_size=100_000,
        ),
    ),
    "pebble-walker": Preset(
        "PEBBLE on dmc:walker-walk: 1000 labels in sessions of 50 every 20k steps, 500k steps, "
        "9k unsupervised pre-training steps, B-Pref's SAC (2x1024, batch 1024)",
        _PEBBLE_WALKER,
    ),
    "pebble-walker-1000": Preset(
        "B-Pref's released PEBBLE script for dmc:walker-walk at 1000 labels: sessions of 100 "
        "every 20k steps (the budget spent by 190k), reward fits of up to 50 epochs; otherwise "
        "as pebble-walker. With prefrl's 2x256 SAC it reached 96% of SAC on the true reward",
        dataclasses.replace(
            _PEBBLE_WALKER,
            schedule=dataclasses.replace(_PEBBLE_WALKER.schedule, session_size=100),
            reward=RewardConfig(max_epochs=50),
        ),
    ),
    "qpa-walker-100": Preset(
        "QPA on dmc:walker-walk from 100 labels (sessions of 10 every 20k steps): policy-aligned "
        "queries, hybrid replay (half of each batch from the last 10 episodes while labels are "
        "asked), 20 crops per label, the net's raw tanh as the reward; 500k steps, B-Pref's SAC "
        "(2x1024, batch 1024)",
        dataclasses.replace(_PEBBLE_WALKER, **_QPA),
    ),
    "qpa-cheetah-100": Preset(
        "QPA on dmc:cheetah-run from 100 labels, 1M steps; otherwise as qpa-walker-100",
        dataclasses.replace(_PEBBLE_WALKER, env="dmc:cheetah-run", steps=1_000_000, **_QPA),
    ),
    "christiano-halfcheetah": Preset(
        "Christiano et al. (2017) settings on HalfCheetah-v5 with SAC: 1000 labels, a quarter "
        "from the random policy, then a decaying rate; 2x64 reward nets; 1.5 s clips; 300k steps",
        OnlineConfig(
            env="HalfCheetah-v5",
            steps=300_000,
            warmstart_steps=10_000,
            segment_length=30,
            schedule=ScheduleConfig(kind="decay", budget=1000, interval=5_000),
            reward=_CHRISTIANO_REWARD,
        ),
    ),
}


# Preference Transformer's IQL settings per domain (Kim et al. 2023, after Kostrikov et al. 2022).
OFFLINE_PRESETS: dict[str, Preset] = {
    "iql-mujoco": Preset(
        "IQL for MuJoCo locomotion: expectile 0.7, temperature 3.0, 1M steps",
        OfflineConfig(iql=IQL_PRESETS["mujoco"]),
    ),
    "iql-antmaze": Preset(
        "IQL for AntMaze: expectile 0.9, temperature 10.0",
        OfflineConfig(iql=IQL_PRESETS["antmaze"]),
    ),
    "iql-adroit": Preset(
        "IQL for Adroit: expectile 0.7, temperature 0.5, actor dropout 0.1",
        OfflineConfig(iql=IQL_PRESETS["adroit"]),
    ),
}


# RFCL (Tao et al. 2024): the paper's per-suite curriculum rules; SAC as in the paper (10 critics
# of 3x256 with LayerNorm) or, for a 2-core CPU, 3x128 critics with an update every other step.
# The paper's Adroit time limit, 16 + steps left // 3, is for its human demos (door's average
# 269 steps); planned demos reach success in 32-79 steps, about as fast as a trained policy, so
# a third of what is left of them is too short (docs/guides/demos.md): the CPU preset, made for
# planned demos, gives all of it.
_RFCL_ADROIT = {"env": "adroit:door", "demos": Path("demos/door"),  # (where `demos plan` writes)
                "reverse_delta": 8, "reverse_streak": 3, "reverse_time_divisor": 3}  # fmt: skip
_RFCL_PAPER = RFCLConfig(steps=1_000_000, eval_interval=20_000, checkpoint_interval=50_000,
                         envs=8, update_every=2, **_RFCL_ADROIT)  # fmt: skip
"""The paper's Adroit runs: 8 envs, an update every other env step."""
_RFCL_CPU_SAC = dataclasses.replace(RFCL_SAC, hidden_dims=(128, 128, 128))
RFCL_PRESETS: dict[str, Preset] = {
    "rfcl-maze": Preset(
        "the built-in maze from 1-5 demos on a CPU: delta 4, streak 2, time limit 16 + steps "
        "left, 10 critics 2x128, 2k random steps, 60k steps",
        RFCLConfig(
            env="toy:maze",
            steps=60_000,
            warmstart_steps=2_000,
            eval_episodes=10,
            sac=dataclasses.replace(RFCL_SAC, hidden_dims=(128, 128)),
        ),
    ),
    "rfcl-adroit": Preset(
        "Adroit in the paper's wall-time config: delta 8, streak 3, time limit 16 + steps left "
        "// 3 (for human demos; planned ones: --reverse-time-divisor 1), 10 critics 3x256, "
        "8 envs, an update every other env step (update-to-data 0.5), 1M steps (add "
        "--env-workers 8 where there are cores)",
        _RFCL_PAPER,
    ),
    "rfcl-adroit-sample-efficient": Preset(
        "Adroit in the paper's sample-efficient config: the wall-time one with 10 critic steps "
        "and half an actor step per env step (20 critic steps and 1 actor step every other env "
        "step), 1M steps",
        dataclasses.replace(_RFCL_PAPER, sac=dataclasses.replace(RFCL_SAC, utd_ratio=20)),
    ),
    "rfcl-adroit-cpu": Preset(
        "Adroit on a 2-core CPU: delta 8, streak 3, time limit 16 + steps left (for planned "
        "demos; with people's add --reverse-time-divisor 3 --demo-action-scale 1.25), critics "
        "3x128, an update every other env step (update-to-data 0.5, the paper's wall-time "
        "setting), 500k steps",
        RFCLConfig(
            steps=500_000,
            eval_interval=20_000,
            checkpoint_interval=25_000,
            update_every=2,
            sac=_RFCL_CPU_SAC,
            **{**_RFCL_ADROIT, "reverse_time_divisor": 1},
        ),
    ),
    "rfcl-metaworld-cpu": Preset(
        "MetaWorld on a 2-core CPU (metaworld:stick-pull by default; demos from "
        "`prefrl demos script`): delta 8, streak 3, time limit 16 + steps left, critics 3x128, "
        "an update every other env step, 500k steps",
        RFCLConfig(
            env="metaworld:stick-pull",
            demos=Path("demos/stick-pull"),
            steps=500_000,
            eval_interval=20_000,
            checkpoint_interval=25_000,
            update_every=2,
            reverse_delta=8,
            reverse_streak=3,
            sac=_RFCL_CPU_SAC,
        ),
    ),
}


# Learning from preferences on frames (the seed: mrahtz/learning-from-human-preferences).
_PONG = FramePreferenceConfig(
    env="atari:Pong",
    steps=10_000_000,
    labels=5_500,
    pretrain_steps=3_000,
    reward=FrameRewardConfig(dropout=0.5, steps_per_fit=20),
    fit_every=80,  # 20 steps of 32 pairs every 6,400 agent steps: the paper's 1 per 10
    eval_interval=250_000,
    checkpoint_interval=250_000,
    video_interval=1_000_000,
    log_interval=20_000,
)
"""Pong from preferences as in the paper (A2C, 10M agent steps)."""

FRAME_PRESETS: dict[str, Preset] = {
    "movingdot": Preset(
        "MovingDot as the seed trains it: its MovingDot reward network (the dot's position and "
        "the action), A2C with one env and entropy 0.02, 150k agent steps, 500 random-policy "
        "labels (200 passes of pre-training), 1500 in all",
        FramePreferenceConfig(
            env="movingdot",
            steps=150_000,
            a2c=A2CConfig(n_envs=1, entropy_coef=0.02),
            reward=FrameRewardConfig(network="dot", steps_per_fit=10),
            pretrain_steps=2_500,
            fit_every=64,
            eval_episodes=32,
        ),
    ),
    "pong": Preset(
        "Pong as in the paper: dropout 0.5, 5.5k labels over 10M agent steps, the reward CNN "
        "trained on 1 labelled pair per 10 agent steps",
        _PONG,
    ),
    # PPO learns Pong's score in fewer frames than the seed's A2C (within 20M frames A2C does
    # not: docs/notes/2026-11-28-pixels.md), so the 20M-frame row is PPO's. A PPO update is 12.8
    # of A2C's (8 x 128 agent steps against 16 x 5): a fit every 6 keeps the paper's rate.
    "pong-ppo": Preset(
        "Pong from preferences in 20M frames: the pong preset's reward and labels with PPO "
        "(Baselines' Atari settings), 5M agent steps, a fit every 6 updates (6,144 agent "
        "steps: the paper's 1 labelled pair per 10 agent steps)",
        dataclasses.replace(_PONG, algo="ppo", steps=5_000_000, fit_every=6),
    ),
}
