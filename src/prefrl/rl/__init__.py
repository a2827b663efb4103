"""RL on the environment's own reward (SAC, PPO; A2C/PPO on frames through `prefrl.pixels`):
the baseline every preference workflow is measured against, and `prefrl eval`'s side-by-side
comparison of trained policies."""
