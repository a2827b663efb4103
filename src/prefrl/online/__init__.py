"""Online learning from preferences (PEBBLE with SAC, PrefPPO with PPO): the agent's segments
are paired, a teacher (scripted, a person, your own) labels them, a reward model is fitted on
the labels, and the agent learns from the learned reward, all while it trains."""
