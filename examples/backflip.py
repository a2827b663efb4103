"""Teach the Hopper a backflip from preferences: a behaviour no Gymnasium env has a reward for.

The teacher is a rule of our own, not the env's reward: of two clips (1.5 s each, as the people
who taught rl-teacher's Hopper saw) it prefers the one that scores more. Each leap (the whole
body in the air from take-off to touch-down, having taken off from its feet) scores its backward
turns past the first quarter, up to one turn; coming down from most of a turn scores half a turn
more, times how near standing (how upright and how high the torso is then); each backflip
landed on its feet scores a turn, and time on its feet a little (`learner(floor=True)`: and time
lying on the floor costs a little more). The agent never sees the rule, only the answers.

    python examples/backflip.py                # 500k steps, 1000 labels (hours on a CPU)
    python examples/backflip.py 20000 100      # a short try: steps, labels

The env is Gymnasium's Hopper-v5 that does not end an episode when the robot falls (a flip
passes through angles the stock Hopper calls unhealthy): a flip landed leaves it standing, to flip
again. While it trains, most episodes start instead from a state of its own earlier leaps,
mid-flip, and last one clip: practice at landing, which it otherwise tries once a flip (the
evaluations start standing). Its reward is the same rule, step by step: the agent does not train on
it, but evaluations report it, so a run's curve is the rule's own score, and `prefrl rl` on the
same env is SAC given the rule as a hand-written reward.
(benchmarks/backflip.py runs both side by side.)
"""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path
from typing import NamedTuple

# (prefrl first: imported before MuJoCo, it picks the headless OpenGL back end that the run's
# videos need on a machine without a display)
from prefrl import Label, PreferenceLearner, RewardConfig, ScheduleConfig, Teacher  # isort: skip

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv

TURN = 2 * np.pi
ON_FEET_BONUS = 0.0002
"""Score per step spent on its feet, in turns: standing still through a clip earns 0.038, less
than a leap of 0.3 of a turn. (At 0.002, SAC given the rule as its reward settled on standing
still.)"""
ONE_FLIGHT = 1.0
"""The most a leap's turns in the air count for, in turns: turning further than a backflip
earns no more, so landing it is the only way up."""
FIRST_TURNS = 0.25
"""Turns of a leap that earn nothing: a leap scores only the turns past its first quarter, so
ten leaps of 0.3 of a turn onto its back (0.5) earn less than one flip (0.75). With every turn
paid, PEBBLE's agents made just those ten leaps (docs/notes/2026-11-29-backflip.md)."""
LANDING_BONUS = 1.0
"""Score of a backflip landed on its feet, in turns, on top of its turns in the air: a landed
flip is worth twice one that is not, and standing again it can flip again."""
TOUCHDOWN_BONUS = 0.5
"""Score, in turns, of ending a leap of `MOST_OF_A_TURN` or more, times how near standing it
comes down (`stance`: how upright and how high the torso is as the leap ends). A near landing
is then worth more than a fall on the back before any flip has landed, as it is to a person
watching, and a landing in a crouch more than one sitting on the floor: PEBBLE's agents never
landed one, and so never showed the teacher a landing, and SAC given the rule with the bonus
for foot-first touch-downs only settled on flips that end sitting (docs/notes/
2026-11-29-backflip.md)."""
MOST_OF_A_TURN = 0.75
"""Turns a leap needs before its touch-down counts (at 0.75 the torso is level)."""
TOUCHDOWN_HEIGHT = 0.7
"""Torso height (m) from which a touch-down counts as standing height (`on_feet`'s least)."""
TIE = 0.01
"""Clips whose scores differ by less than this (in turns) are answered "equal"."""
FLOOR_COST = 0.002
"""Cost per step with the torso or thigh on the floor, in turns, where the rule is asked to price
it (`floor=True`; the sixteenth try): a clip spent lying costs 0.38, a whole flip onto its back
and 130 steps lying still earns 0.49, more than standing still (0.04), less than the same flip
got up from at once. Without it the rule pays lying nothing, and the reward PrefPPO learnt from
it paid a flip onto its back three times a landed flip: its clips held no landing, and lying after
a flip sat in every clip that won, while standing sat in those that lost (docs/notes/
2026-11-29-backflip.md, session 74). Ten times the on-feet bonus."""
# Eight rules before this one (in eleven tries) were gamed or gave no way up to a flip (docs/
# notes/2026-11-29-backflip.md): every backward turn (taught rolling on the floor); turns with the torso
# high (falling backwards and getting up); turns of flights taken back when the torso or thigh
# lands (a half flip earned no more than standing); every backward turn in the air (taught a
# tumble of 1.5-2 turns and a fall); at most one turn a flight and a landing as much again
# (taught ten leaps an episode of 0.3 of a turn onto its back, never a landing); each leap's
# turns squared (a small leap earned less than the time on its feet it cost, so the agent
# stood still and 85% of the answers were ties); the best leap of a stretch (SAC leapt most of a
# turn onto its back), also in episodes of one clip (SAC's flips ended sitting), with the
# touch-down paid by stance (SAC came down foot first, but never landed); every leap paid past
# its first quarter, with that touch-down (five unlanded flips an episode). This one is the
# last of those, with practice starts mid-flip.
SEGMENT_LENGTH = 190
"""Steps per clip: 1.5 s of Hopper (8 ms a step), room for a flip and its landing."""
EPISODE_STEPS = 1000
"""Steps an episode: a landed flip leaves the Hopper standing, to flip again, the pull towards
landing under which SAC landed flips. With one try an episode (one clip) it never landed one
(docs/notes/2026-11-29-backflip.md)."""
PRACTICE_SHARE = 0.7
"""Share of training episodes that start mid-flip, from a state of the Hopper's own earlier leaps
(`PRACTICE_FROM` of a turn or more into a leap, the whole body in the air), and last one clip
(`SEGMENT_LENGTH` steps): practice at landing. Under every rule before, SAC turned whole turns in
the air within 100-200k steps but landed flips on one seed of three, trying a landing once a
flip, after the flip it had to make first. A reset given a seed (every evaluation's, and a run's
first) starts standing, as Hopper-v5's: the training loops reset unseeded after that."""
PRACTICE_FROM = 0.4
"""Turns into a leap before its states are kept as practice starts."""
PRACTICE_KEPT = 5000
"""Practice starts kept (the newest), in each env: some 150 leaps' worth."""
MID_FLIP = (0.25, 0.9)
"""Backward turns from upright (modulo whole turns) of a Hopper in the air at a clip's first step
that the rule takes as a flip under way (`start_state`): a clip that starts at a practice start,
or mid-leap, is judged on the flip it shows, as a person watching would."""
RULE = "practice"
"""The rule's name in benchmark rows and run folders (rules changed as earlier ones were gamed):
the twelfth rule (every leap's turns past a quarter, its touch-down paid by how near standing it
comes down) in episodes of which `PRACTICE_SHARE` start mid-flip."""
ENV_ID = "backflip:HopperBackflip-v0"
SCALED_ENV_ID = "backflip:HopperBackflipScaled-v0"
FLOOR_ENV_ID = "backflip:HopperBackflipFloor-v0"
"""`ENV_ID` rewarded by the rule with `FLOOR_COST`."""


def stance(height: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """How near standing a pose is, 0 to 1: the cosine of the torso's angle (0 past horizontal)
    times its height over `TOUCHDOWN_HEIGHT` (at most 1). Sitting upright on the floor after a
    flip (the torso at 0.23 m) is 0.33, a crouch at 0.5 m 0.71."""
    return np.maximum(np.cos(angle), 0.0) * np.minimum(height / TOUCHDOWN_HEIGHT, 1.0)


def on_feet(height: np.ndarray, angle: np.ndarray, rising: np.ndarray, air: np.ndarray):
    """Torso high, upright (within ~37 degrees of vertical, any number of turns later), hardly
    moving up or down, and a foot on the floor (not at a jump's apex)."""
    return (height > 0.7) & (np.cos(angle) > 0.8) & (np.abs(rising) < 1.0) & ~air


NEAR = 0.05
"""The torso or thigh closer than this to the floor (m) lands on it: lying on the floor keeps them
about 2 cm above it, a flip far higher."""
AIR = 0.01
"""Every part farther than this from the floor (m) is in the air: a foot standing on the floor is
within a few millimetres of it (it sinks in up to 1 cm)."""


def _hopper():
    """Hopper-v5's own model, a data to pose it in (to see what a pose touches), the floor and
    the parts that must not land on it."""
    global _HOPPER
    if _HOPPER is None:
        path = Path(gym.envs.mujoco.__file__).parent / "assets" / "hopper.xml"
        model = mujoco.MjModel.from_xml_path(str(path))
        model.geom_margin[:] = NEAR
        floor = model.geom("floor").id
        body = np.array([model.geom(name).id for name in ("torso_geom", "thigh_geom")])
        _HOPPER = model, mujoco.MjData(model), floor, body
    return _HOPPER


_HOPPER = None


def floor_contacts(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each observation (axis -1): whether the torso or thigh is down (within `NEAR` of the
    floor) and whether the whole body is in the air (every part farther than `AIR` from it).
    The pose is in the observation (the torso's height and angle, the three joints'), so the
    teacher sees what the simulator would."""
    model, data, floor, body = _hopper()
    poses = np.asarray(obs, np.float64)[..., :5].reshape(-1, 5)
    down, air = np.empty(len(poses), bool), np.empty(len(poses), bool)
    for i, pose in enumerate(poses):
        data.qpos[1:6] = pose
        mujoco.mj_kinematics(model, data)
        mujoco.mj_collision(model, data)
        geoms = data.contact.geom  # (the contacts as arrays: a Python object each costs more
        near = (geoms == floor).any(axis=1)  # than the collision check itself)
        down[i] = (geoms[near, :, None] == body).any()
        air[i] = (data.contact.dist[near] > AIR).all()
    shape = np.shape(obs)[:-1]
    return down.reshape(shape), air.reshape(shape)


class RuleState(NamedTuple):
    """What the rule remembers between steps, for arrays of runs at once."""

    ready: np.ndarray
    """On its feet since the torso or thigh last came down."""
    since_feet: np.ndarray
    """Backward turns since it last stood."""
    leap: np.ndarray
    """Backward turns of the leap under way (0 on the floor)."""


def start_state(angle, feet, down, air) -> RuleState:
    """The rule's state at a clip's first step: ready on its feet; or, in the air with the torso
    and thigh clear of the floor and turned back from upright by `MID_FLIP` turns, ready with
    those turns made (`since_feet` and the leap's), so that finishing that flip and landing it
    counts. Outside that window a Hopper in the air is not ready: a hop that starts the clip
    tipped forward (0.95 of a turn back, modulo whole turns) is no flip."""
    back = np.mod(-np.asarray(angle, np.float64) / TURN, 1.0)
    mid_flip = air & ~down & (back >= MID_FLIP[0]) & (back <= MID_FLIP[1])
    turns = np.where(mid_flip, back, 0.0)
    return RuleState((feet & ~down) | mid_flip, turns, turns)


def paid_turns(leap: np.ndarray) -> np.ndarray:
    """The turns a leap of `leap` backward turns is paid for: those past `FIRST_TURNS`, up to
    `ONE_FLIGHT`."""
    return np.clip(leap - FIRST_TURNS, 0.0, ONE_FLIGHT - FIRST_TURNS)


def rule_step(state: RuleState, turn, air_before, air_after, down, feet, pose):
    """One step of the rule. A leap is the stretch a ready Hopper spends with the whole body in
    the air (`air_before` and `air_after` at both ends of the step); it earns its backward turns
    (`turn`: this step's, in turns) as `paid_turns` says, so rocking back and forth in one leap
    earns one rock's worth. A Hopper not ready (rolling, lying, getting up) earns nothing. A leap of
    `MOST_OF_A_TURN` or more earns `TOUCHDOWN_BONUS` x `pose` as it ends, whatever comes down
    first (`pose`: the `stance` after the step). A landed backflip: back on its feet,
    ready, at least 0.9 of a backward turn since it last stood: it earns `LANDING_BONUS`.
    Returns the step's credit, the new state and the flips landed."""
    ready, since_feet, leap = state
    in_air = ready & air_before & air_after
    new_leap = np.where(in_air, leap + turn, 0.0)
    credit = np.where(in_air, paid_turns(new_leap) - paid_turns(leap), 0.0)
    # (a leap ends as a part touches the floor, or as the torso or thigh comes near it: `down`
    # comes a step or more before the touch, and ends the leap as it makes the Hopper not ready)
    touchdown = ready & air_before & (~air_after | down) & (leap >= MOST_OF_A_TURN)
    credit = credit + np.where(touchdown, TOUCHDOWN_BONUS * pose, 0.0)
    since_feet = since_feet + turn
    ready = ready & ~down
    landed = np.where(feet & ready, np.maximum(np.floor(since_feet + 0.1), 0), 0).astype(int)
    credit = credit + LANDING_BONUS * landed
    state = RuleState(ready | feet, np.where(feet, 0.0, since_feet), new_leap)
    return credit, state, landed


def rule_score(obs: np.ndarray, floor: bool = False) -> np.ndarray:
    """The rule's score of Hopper observations in time order (axis -2): the paid turns of their
    leaps from its feet, the touch-downs' and landed flips' bonuses, and the on-feet bonus for
    every step after the first (`floor`: less `FLOOR_COST` for each with the torso or thigh
    down)."""
    return rule_tally(obs, floor)[0]


def rule_tally(obs: np.ndarray, floor: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`rule_score` of `obs` and the backflips landed in them."""
    score, landed_flips = 0.0, 0
    for credit, _, _, landed, down in rule_trace(obs):
        score = score + credit - (FLOOR_COST * down if floor else 0.0)
        landed_flips = landed_flips + landed
    return score, landed_flips


def rule_trace(obs: np.ndarray):
    """The rule over observations in time order (axis -2), a step at a time: each step's credit
    (with the on-feet bonus, without the floor's cost), the rule's state before and after it, the
    flips it landed and whether the torso or thigh is down after it."""
    height, angle, rising = obs[..., 0], obs[..., 1], obs[..., 6]
    down, air = floor_contacts(obs)
    feet = on_feet(height, angle, rising, air)
    turns = -np.diff(angle, axis=-1) / TURN
    pose = stance(height, angle)
    state = start_state(angle[..., 0], feet[..., 0], down[..., 0], air[..., 0])
    for t in range(turns.shape[-1]):
        credit, after, landed = rule_step(
            state, turns[..., t], air[..., t], air[..., t + 1], down[..., t + 1],
            feet[..., t + 1], pose[..., t + 1],
        )  # fmt: skip
        yield credit + ON_FEET_BONUS * feet[..., t + 1], state, after, landed, down[..., t + 1]
        state = after


class BackflipTeacher(Teacher):
    """Answers each pair by the rule, from the clips' observations alone (Hopper's observation
    holds the torso's height, angle and vertical speed: entries 0, 1 and 6); `floor`: the rule
    with `FLOOR_COST`."""

    def __init__(self, floor: bool = False):
        self.floor = floor

    def check_env(self, env):
        if env.obs_dim != 11 or "Hopper" not in type(env.unwrapped).__name__:
            raise ValueError(f"the backflip rule judges a Hopper's torso (entries 0, 1 and 6 of "
                             f"Hopper-v5's 11 observations): {env.env_id} is not a Hopper")  # fmt: skip

    def answer(self, left, right):
        diff = rule_score(right.obs, self.floor) - rule_score(left.obs, self.floor)
        return np.select([np.abs(diff) < TIE, diff > 0], [Label.EQUAL, Label.RIGHT], Label.LEFT)


class HopperBackflip(HopperEnv):
    """Hopper-v5 that goes on after a fall (to the time limit, `EPISODE_STEPS`), rewarded by
    the rule step by step, so that the sum of its rewards over an episode is the episode's rule
    score. It counts the backflips it lands (at least 0.9 of a backward turn from its feet back
    to its feet, the torso and thigh never on the floor, as `rule_step` says) and the rule's
    score so far in `info["episode_metrics"]`, which evaluations log as
    `eval/landed_flips_mean` and `eval/rule_score_mean`. `reward_scale` multiplies the reward
    (not the score): the rule gives about 0.03 a step during a flip, where SAC's defaults are
    tuned for Hopper's own 1-3 a step. `practice`: the share of unseeded resets that start
    mid-flip, from the states it kept of its own leaps, for one clip (`PRACTICE_SHARE`).
    `floor`: the reward costs `FLOOR_COST` a step with the torso or thigh down (the score
    reported stays the rule's without it, comparable with every run's)."""

    def __init__(self, reward_scale: float = 1.0, practice: float = PRACTICE_SHARE,
                 floor: bool = False, **kwargs):  # fmt: skip
        if not 0.0 <= practice <= 1.0:  # (NaN fails too)
            raise ValueError(f"practice={practice!r}: the share of resets that start mid-flip "
                             "must be within [0, 1]")  # fmt: skip
        super().__init__(terminate_when_unhealthy=False, **kwargs)
        self.reward_scale = reward_scale
        self.practice = practice
        self.floor = floor
        self.practice_starts: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=PRACTICE_KEPT)
        self._practising = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._practising = (seed is None and len(self.practice_starts) > 0
                            and self.np_random.random() < self.practice)  # fmt: skip
        return super().reset(seed=seed, options=options)

    def reset_model(self):
        if self._practising:
            qpos, qvel = self.practice_starts[self.np_random.integers(len(self.practice_starts))]
            self.set_state(qpos, qvel)
            obs = self._get_obs()
        else:
            obs = super().reset_model()
        down, self._air = floor_contacts(obs)
        feet = on_feet(obs[0], obs[1], obs[6], self._air)
        self._rule = start_state(obs[1], feet, down, self._air)
        self._landed, self._score, self._steps = 0, 0.0, 0
        return obs

    def step(self, action):
        before = self._get_obs()
        obs, _, terminated, truncated, info = super().step(action)
        down, air = floor_contacts(obs)
        feet = on_feet(obs[0], obs[1], obs[6], air)
        credit, self._rule, landed = rule_step(
            self._rule, -(obs[1] - before[1]) / TURN, self._air, air, down, feet,
            stance(obs[0], obs[1]),
        )  # fmt: skip
        self._air = air
        if self._rule.leap >= PRACTICE_FROM and start_state(obs[1], feet, down, air).ready:
            self.practice_starts.append((self.data.qpos.copy(), self.data.qvel.copy()))
        score = float(credit) + ON_FEET_BONUS * float(feet)
        self._score += score
        self._landed += int(landed)
        self._steps += 1
        truncated = truncated or (self._practising and self._steps >= SEGMENT_LENGTH)
        info["episode_metrics"] = {"landed_flips": self._landed, "rule_score": self._score}
        reward = score - (FLOOR_COST * float(down) if self.floor else 0.0)
        return obs, self.reward_scale * reward, terminated, truncated, info


_NAME, _SCALED_NAME, _FLOOR_NAME = (i.split(":")[1] for i in (ENV_ID, SCALED_ENV_ID, FLOOR_ENV_ID))
if _NAME not in gym.registry:
    gym.register(_NAME, entry_point=HopperBackflip, max_episode_steps=EPISODE_STEPS)
    # The rule x100 as a hand-written reward for SAC: at x1 SAC on it learned nothing in 100k
    # steps (the rule's score of its evaluations stayed within 0.6 turns of 0, no flip landed).
    gym.register(_SCALED_NAME, entry_point=HopperBackflip,
                 max_episode_steps=EPISODE_STEPS, kwargs={"reward_scale": 100.0})  # fmt: skip
    gym.register(_FLOOR_NAME, entry_point=HopperBackflip, max_episode_steps=EPISODE_STEPS,
                 kwargs={"floor": True})  # fmt: skip


# PEBBLE's ensemble (3 x 3x256, tanh), fitted for up to 50 epochs (B-Pref's reward_update).
PEBBLE_REWARD = RewardConfig(max_epochs=50)


def teach(steps: int = 500_000, labels: int | None = None, seed: int = 0, spread: bool = False,
          **settings):  # fmt: skip
    """`learner(...)` trained: its result."""
    return learner(steps, labels, seed, spread, **settings).train()


def learner(steps: int = 500_000, labels: int | None = None, seed: int = 0, spread: bool = False,
            reward: RewardConfig = PEBBLE_REWARD, floor: bool = False,
            **settings) -> PreferenceLearner:  # fmt: skip
    """PEBBLE with the schedule that reached 0.96 of SAC on walker-walk (`--preset
    pebble-walker-1000`): 1k random steps, 9k of unsupervised pre-training, then sessions of
    100 labels every 20k steps until the budget (default 1000; fewer on short runs) is spent.
    `spread`: the sessions spread evenly over the whole run instead (every 45k steps of 500k),
    as rl-teacher asks for labels all through training (at a decaying rate): answers then come
    while the policy tries the landings it finds late, which the first 200k steps never show.
    `reward`: the reward model (default PEBBLE_REWARD); `floor`: the teacher (and the env's
    reward, which evaluations do not use) price time on the floor (`FLOOR_COST`); `settings`:
    `PreferenceLearner`'s others (they may replace the steps, schedule and evaluations said
    here). Evaluations play 5 episodes, one on a short try (under 100k steps): each of the env's
    steps puts the pose through MuJoCo's collision check, so 5 episodes of 1000 steps would take
    longer than a short try's training."""
    labels = labels or min(1000, max(10, steps // 500))
    sessions = max(1, labels // 100)
    interval = steps // (sessions + 1) if spread else min(20_000, steps // (sessions + 1))
    settings = {
        "warmstart_steps": min(1_000, steps // 10), "unsupervised_steps": min(9_000, steps // 10),
        "schedule": ScheduleConfig(budget=labels, session_size=min(100, labels),
                                   interval=max(1, interval)),
        "eval_interval": min(10_000, steps), "eval_episodes": 5 if steps >= 100_000 else 1,
        **settings,
    }  # fmt: skip
    return PreferenceLearner(FLOOR_ENV_ID if floor else ENV_ID, BackflipTeacher(floor),
                             steps=steps, seed=seed,
                             segment_length=SEGMENT_LENGTH, reward=reward, **settings)  # fmt: skip


if __name__ == "__main__":
    import backflip  # (this file as the module ENV_ID names, which every process imports)

    result = backflip.teach(*[int(a) for a in sys.argv[1:3]])
    print(
        f"{result.labels} labels; the rule's score of the last evaluation: "
        f"{result.final_eval.returns.mean():.2f} (backward turns in the air, landed flips, "
        "time on its feet)"
    )
