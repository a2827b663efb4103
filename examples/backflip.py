"""Teach the Hopper a backflip from preferences: a behaviour no Gymnasium env has a reward for.

The teacher is a rule of our own, not the env's reward: of two clips (1.5 s each, as the people
who taught rl-teacher's Hopper saw) it prefers the one in which the torso turns further
backwards while off the ground, with a little extra for time spent on its feet (so a flip that
lands beats one that ends on its back). The agent never sees the rule, only the answers.

    python examples/backflip.py                # 500k steps, 1000 labels (hours on a CPU)
    python examples/backflip.py 20000 100      # a short try: steps, labels

The env is Gymnasium's Hopper-v5 that never ends an episode when the robot falls (a flip passes
through angles the stock Hopper calls unhealthy). Its reward is the same rule, step by step: the
agent does not train on it, but evaluations report it, so a run's curve is the rule's own score,
and `prefrl rl` on the same env is SAC given the rule as a hand-written reward.
(benchmarks/backflip.py runs both side by side.)
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv

from prefrl import Label, PreferenceLearner, RewardConfig, ScheduleConfig, Teacher

TURN = 2 * np.pi
ON_FEET_BONUS = 0.0005
"""Score per step spent on its feet, in turns: between two equal flips the one that lands wins,
while standing still for a whole 1000-step episode is worth half a backflip. (At 0.002, two
flips' worth, SAC given the rule as its reward settled on standing still: 1.88 from 140k steps
on, no flip landed.)"""
TIE = 0.01
"""Clips whose scores differ by less than this (in turns) are answered "equal"."""
AIR_HEIGHT = 0.9
"""Turns count only while the torso is above this (m): standing it is at 1.25. The first rule
counted every backward turn, and both methods learned to roll over on the floor instead (three
quarters of their turns with the torso under 0.8): docs/notes/2026-11-29-backflip.md."""
SEGMENT_LENGTH = 190
"""Steps per clip: 1.5 s of Hopper (8 ms a step), room for a flip and its landing."""
ENV_ID = "backflip:HopperBackflip-v0"
SCALED_ENV_ID = "backflip:HopperBackflipScaled-v0"


def on_feet(height: np.ndarray, angle: np.ndarray, rising: np.ndarray) -> np.ndarray:
    """Torso high, upright (within ~37 degrees of vertical, any number of turns later) and
    hardly moving up or down (so not in mid-air, short of a jump's apex)."""
    return (height > 0.7) & (np.cos(angle) > 0.8) & (np.abs(rising) < 1.0)


def air_turns(height: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Backward turns of the torso over the steps (axis -1) it starts and ends above
    `AIR_HEIGHT`. (The torso's hinge angle grows as it leans forward, so a backflip decreases
    it by 2π.)"""
    high = (height[..., 1:] > AIR_HEIGHT) & (height[..., :-1] > AIR_HEIGHT)
    return -(np.diff(angle, axis=-1) * high).sum(-1) / TURN


def rule_score(obs: np.ndarray) -> np.ndarray:
    """The rule's score of Hopper observations in time order (axis -2): backward turns of the
    torso off the ground, plus the on-feet bonus for every step after the first."""
    height, angle, rising = obs[..., 0], obs[..., 1], obs[..., 6]
    feet = on_feet(height[..., 1:], angle[..., 1:], rising[..., 1:])
    return air_turns(height, angle) + ON_FEET_BONUS * feet.sum(-1)


class BackflipTeacher(Teacher):
    """Answers each pair by the rule, from the clips' observations alone (Hopper's observation
    holds the torso's height, angle and vertical speed: entries 0, 1 and 6)."""

    def check_env(self, env):
        if env.obs_dim != 11 or "Hopper" not in type(env.unwrapped).__name__:
            raise ValueError(f"the backflip rule judges a Hopper's torso (entries 0, 1 and 6 of "
                             f"Hopper-v5's 11 observations): {env.env_id} is not a Hopper")  # fmt: skip

    def answer(self, left, right):
        diff = rule_score(right.obs) - rule_score(left.obs)
        return np.select([np.abs(diff) < TIE, diff > 0], [Label.EQUAL, Label.RIGHT], Label.LEFT)


class HopperBackflip(HopperEnv):
    """Hopper-v5 that goes on after a fall (to the time limit), rewarded by the rule step by
    step, so that the sum of its rewards over any stretch is that stretch's rule score. It
    counts the backflips it lands (a whole backward turn off the ground between two times it is
    on its feet, as the rule defines them) and the rule's score so far in `info["episode_metrics"]`,
    which evaluations log as `eval/landed_flips_mean` and `eval/rule_score_mean`.
    `reward_scale` multiplies the reward (not the score): the rule gives about 0.03 a step
    during a flip, where SAC's defaults are tuned for Hopper's own 1-3 a step."""

    def __init__(self, reward_scale: float = 1.0, **kwargs):
        super().__init__(terminate_when_unhealthy=False, **kwargs)
        self.reward_scale = reward_scale

    def reset_model(self):
        obs = super().reset_model()
        self._turns_in_air, self._landed, self._score = 0.0, 0, 0.0
        return obs

    def step(self, action):
        before = self._get_obs()
        obs, _, terminated, truncated, info = super().step(action)
        pair = np.stack([before, obs])
        score = float(rule_score(pair))
        self._score += score
        self._turns_in_air += float(air_turns(pair[:, 0], pair[:, 1]))
        if on_feet(obs[0], obs[1], obs[6]):
            # On its feet again: every whole backward turn made off the ground since it last
            # was is a landed flip.
            self._landed += max(0, round(self._turns_in_air))
            self._turns_in_air = 0.0
        info["episode_metrics"] = {"landed_flips": self._landed, "rule_score": self._score}
        return obs, self.reward_scale * score, terminated, truncated, info


if "HopperBackflip-v0" not in gym.registry:
    gym.register("HopperBackflip-v0", entry_point=HopperBackflip, max_episode_steps=1000)
    # The rule x100 as a hand-written reward for SAC: at x1 SAC on it learned nothing in 100k
    # steps (the rule's score of its evaluations stayed within 0.6 turns of 0, no flip landed).
    gym.register("HopperBackflipScaled-v0", entry_point=HopperBackflip, max_episode_steps=1000,
                 kwargs={"reward_scale": 100.0})  # fmt: skip


def teach(steps: int = 500_000, labels: int | None = None, seed: int = 0, **settings):
    """PEBBLE with the schedule that reached 0.96 of SAC on walker-walk (`--preset
    pebble-walker-1000`): 1k random steps, 9k of unsupervised pre-training, then sessions of
    100 labels every 20k steps until the budget (default 1000; fewer on short runs) is spent."""
    labels = labels or min(1000, max(10, steps // 500))
    sessions = max(1, labels // 100)
    learner = PreferenceLearner(
        ENV_ID, BackflipTeacher(), steps=steps, seed=seed,
        warmstart_steps=min(1_000, steps // 10), unsupervised_steps=min(9_000, steps // 10),
        schedule=ScheduleConfig(budget=labels, session_size=min(100, labels),
                                interval=max(1, min(20_000, steps // (sessions + 1)))),
        segment_length=SEGMENT_LENGTH, reward=RewardConfig(max_epochs=50),
        eval_interval=min(10_000, steps), eval_episodes=5,
        **settings,
    )  # fmt: skip
    return learner.train()


if __name__ == "__main__":
    import backflip  # (this file as the module ENV_ID names, which every process imports)

    result = backflip.teach(*[int(a) for a in sys.argv[1:3]])
    print(
        f"{result.labels} labels; the rule's score of the last evaluation: "
        f"{result.final_eval.returns.mean():.2f} (turns backwards + time on its feet)"
    )
