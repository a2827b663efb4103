"""Demonstrations planned with the simulator (`prefrl demos plan`): for each reset seed, the
cross-entropy method searches open-loop action sequences for one that solves the task, and the
best is replayed as a demo. No expert policy is needed, only a task that restores its state
and an objective that says how close an episode came.

The sequence is a few keyframes, linearly interpolated over the episode: the arm's joint
targets (Adroit's first 4 actuators: slide and three rotations) and one grasp level shared by
every finger's flexion joints (a hand synergy); the wrist and the sideways finger joints stay
centred. Each task has its own objective (`OBJECTIVES`): on the door, how far the hinge turned
at the end, how far the latch turned, how close the palm came to the handle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prefrl.data.demos import DemoSet
from prefrl.envs import make_env
from prefrl.loops.demos import rollout_demo
from prefrl.rundir.config import check_fields

ARM = 4  # Adroit's arm actuators (ARTz, ARRx, ARRy, ARRz)


def door_objective(base) -> Callable[[], float]:
    """Called after every step; returns the episode's score so far (the last call counts): the
    hinge's angle at the end, the steps it spent open (so it opens early enough to stay open
    for a demo's hold), the latch's turn, the palm's closest approach to the handle."""
    closest, opened = [np.inf], [0]
    hinge, latch = base.door_hinge_addrs, base.model.joint("latch").qposadr[0]

    def score() -> float:
        data = base.data
        palm, handle = data.site_xpos[base.grasp_site_id], data.site_xpos[base.handle_site_id]
        closest[0] = min(closest[0], float(np.linalg.norm(palm - handle)))
        opened[0] += int(data.qpos[hinge] >= 1.35)
        return float(10 * data.qpos[hinge] + 0.2 * opened[0]
                     + 2 * min(data.qpos[latch], 1.2) - 5 * closest[0])  # fmt: skip

    return score


OBJECTIVES = {"adroit:door": door_objective}


@dataclass(frozen=True)
class PlanConfig:
    keyframes: int = 6
    population: int = 48
    elites: int = 8
    iterations: int = 40
    init_std: float = 0.5

    def __post_init__(self) -> None:
        check_fields(self, {
            "keyframes": (self.keyframes >= 2, "an integer >= 2"),
            "elites": (self.elites >= 1, "a positive integer"),
            "population": (self.population >= self.elites,
                           f"at least the {self.elites} best plans kept each iteration"),
            "iterations": (self.iterations >= 1, "a positive integer"),
            "init_std": (self.init_std > 0, "> 0"),
        }, "--")  # fmt: skip


def keyframe_actions(theta: np.ndarray, steps: int, flexion: np.ndarray, n_actions: int):
    """(K, ARM + 1) keyframes -> (steps, n_actions) actions in [-1, 1]: the arm's targets and a
    grasp level on the `flexion` actuators, interpolated linearly; the others 0 (centred)."""
    at = np.linspace(0, steps - 1, len(theta))
    actions = np.zeros((steps, n_actions), np.float32)
    for c in range(ARM):
        actions[:, c] = np.interp(np.arange(steps), at, theta[:, c])
    actions[:, flexion] = np.interp(np.arange(steps), at, theta[:, ARM])[:, None]
    return np.clip(actions, -1, 1)


def plan_demos(env_id: str, episodes: int, seed: int = 0, hold: int = 20,
               config: PlanConfig | None = None, max_tries: int | None = None,
               log: Callable[[str], None] = print) -> DemoSet:  # fmt: skip
    """Demos of `env_id` planned one reset seed at a time (seeds `seed`, `seed + 1`, ...), the
    first `episodes` whose plan reaches a stable success. Each search starts from the last plan
    that worked (the scenes differ by a few centimetres)."""
    if env_id not in OBJECTIVES:
        raise ValueError(f"no planner objective for {env_id}: planned demos exist for "
                         f"{', '.join(OBJECTIVES)} (other tasks: prefrl demos record)")  # fmt: skip
    if episodes < 1:
        raise ValueError(f"--episodes {episodes} is invalid: expected a positive integer")
    cfg = config or PlanConfig()
    env = make_env(env_id, seed=seed)
    base = env.unwrapped
    names = [base.model.actuator(j).name for j in range(env.action_dim)]
    flexion = np.array([j for j, n in enumerate(names) if n[-1] in "012" and "TH" not in n])
    steps = env.max_episode_steps

    def episode_score(reset_seed: int, theta: np.ndarray) -> float:
        env.reset(seed=reset_seed)
        score, value = OBJECTIVES[env_id](base), 0.0
        for action in keyframe_actions(theta, steps, flexion, env.action_dim):
            env.step(action)
            value = score()
        return value

    demos, tried, limit = [], 0, max_tries or 3 * episodes
    solved = np.zeros((cfg.keyframes, ARM + 1))  # (the last plan that worked: the next's start)
    try:
        while len(demos) < episodes and tried < limit:
            reset_seed = seed + tried
            tried += 1
            rng = np.random.default_rng([seed, reset_seed])
            mean, std = solved.copy(), np.full_like(solved, cfg.init_std)
            for it in range(cfg.iterations):
                thetas = np.clip(mean + std * rng.standard_normal((cfg.population, *mean.shape)),
                                 -1, 1)  # fmt: skip
                scores = np.array([episode_score(reset_seed, t) for t in thetas])
                elite = thetas[np.argsort(-scores)[: cfg.elites]]
                mean, std = elite.mean(0), elite.std(0) + 0.02
                plan = keyframe_actions(elite[0], steps, flexion, env.action_dim)
                info = {"source": "planned", "planner": "cem", "seed": reset_seed,
                        "iterations": it + 1}  # fmt: skip
                demo = rollout_demo(env, _replay(plan), reset_seed, hold, info)
                if demo is not None:
                    log(f"seed {reset_seed}: solved after {it + 1} iterations "
                        f"({(it + 1) * cfg.population} episodes tried)")  # fmt: skip
                    demos.append(demo)
                    solved = elite[0]
                    break
            else:
                log(f"seed {reset_seed}: no stable success in {cfg.iterations} iterations")
    finally:
        env.close()
    if len(demos) < episodes:
        raise RuntimeError(f"the planner solved {len(demos)} of {tried} reset seeds "
                           f"({episodes} asked for): try more --iterations")  # fmt: skip
    return DemoSet(env_id, demos, {"source": "planned", "planner": "cem", "seed": seed,
                                   "hold": hold, **dataclasses.asdict(cfg)})  # fmt: skip


def _replay(plan: np.ndarray):
    """`act(obs)` that plays `plan` step by step."""
    step = iter(plan)
    return lambda obs: next(step)
