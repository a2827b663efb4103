"""SAC on an env's own reward (no preferences: the baseline a preference run is measured
against), then its policy loaded back from the run directory and evaluated."""

import sys

from prefrl import RLLearner, evaluate, load_policy

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000  # (CI runs it shorter)
result = RLLearner("Pendulum-v1", steps=steps, warmstart_steps=1_000, eval_interval=5_000).train()
policy = load_policy(result.run_dir)  # a callable policy: action = policy(observation)
print("on 5 new episodes:", evaluate(policy, "Pendulum-v1", episodes=5, seed=100))
