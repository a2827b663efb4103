"""Learning from pixels (MovingDot, Atari): A2C or PPO on frames, on the true reward or on a
CNN reward model fitted to preferences between clips, and the viewer of a frames run."""
