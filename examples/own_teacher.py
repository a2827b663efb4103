"""A teacher of your own: it answers from a rule of yours, never from the env's reward. Here, on
Pendulum-v1, it prefers the clip in which the pole's tip is higher on average. The agent sees
only the answers; the env's reward (swing up, then hold still with little effort), which
neither the teacher nor the agent reads, is what the evaluations report."""

import sys

import numpy as np

from prefrl import Label, PreferenceLearner, ScheduleConfig, Teacher


class HigherTip(Teacher):
    def answer(self, left, right):  # the clips of a batch of pairs; one label per pair
        height = lambda clips: clips.obs[..., 0].mean(-1)  # observation: cos θ, sin θ, θ'
        return np.where(height(right) > height(left), Label.RIGHT, Label.LEFT)


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000  # (CI runs it shorter)
learner = PreferenceLearner(
    "Pendulum-v1", HigherTip(), steps=steps, warmstart_steps=1_000,
    schedule=ScheduleConfig(budget=200, session_size=20, interval=1_000), eval_interval=2_000,
)  # fmt: skip
result = learner.train()  # (it ends by printing the result's one line)
