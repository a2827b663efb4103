"""Agents: each a pure jitted `update(state, batch, key) -> (state, metrics)` plus `act`."""

from prefrl.agents.sac import SAC, SACConfig, SACState

__all__ = ["SAC", "SACConfig", "SACState"]
