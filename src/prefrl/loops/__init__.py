"""The workflows, each a loop that wires envs, agents, data and run directories together."""
