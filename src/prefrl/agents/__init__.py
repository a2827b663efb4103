"""Agents: each a pure jitted `update(state, batch, key) -> (state, metrics)` plus `act`."""

from prefrl.agents.ppo import PPO, PPOConfig, PPOState, Rollout, RolloutStorage
from prefrl.agents.sac import SAC, SACConfig, SACState

__all__ = [
    "PPO",
    "SAC",
    "PPOConfig",
    "PPOState",
    "Rollout",
    "RolloutStorage",
    "SACConfig",
    "SACState",
]
