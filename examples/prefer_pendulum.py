"""Swing up Pendulum-v1 from 200 preferences of a scripted teacher, in Python (two minutes on a
laptop CPU): the agent never sees the task's reward, only which of two segments was better."""

import sys

from prefrl import PreferenceLearner, ScheduleConfig, load_policy

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000  # (CI runs it shorter)
learner = PreferenceLearner(
    "Pendulum-v1", teacher="oracle", steps=steps, warmstart_steps=1_000,
    schedule=ScheduleConfig(budget=200, session_size=20, interval=1_000), eval_interval=2_000,
)  # fmt: skip
result = learner.train()
print(f"{result.labels} labels, final return {result.final_eval.returns.mean():.0f}")
policy = load_policy(result.run_dir)  # a callable policy: action = policy(observation)
