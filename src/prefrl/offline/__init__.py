"""Offline learning from preferences: D4RL-style datasets and their queries, a reward model
(MR, LSTM, Preference Transformer) from labelled queries then IQL, and offline CPL."""
