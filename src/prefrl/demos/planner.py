"""Demonstrations planned with the simulator (`prefrl demos plan`): no expert policy is needed,
only a task that restores its state exactly and a shaped score of how well it is going.

The planner is model-predictive path-integral control (MPPI) with the simulator as its model.
Before every step it saves the state, rolls out `samples` noisy variations of its current plan
for `horizon` steps, restores the state, and moves the plan to the average of the variations
weighted by exp(return / temperature); it then takes the plan's first action and shifts the
plan by one step. The noise is drawn every few steps and interpolated between, so the sampled
motions are smooth. Each step of the planner's episode is kept, so a plan that reaches a
stable success is the demo (`rollout_demo`), and it replays exactly.

On the arm tasks the plan is a hand synergy rather than every actuator: the arm's joint
targets (and on the hammer the wrist's) plus one grasp level shared by the fingers' flexion
joints; the others stay centred. The pen is turned in the hand, so its plan holds every
actuator and starts from the hand's current pose.

Each task's step score (`PLANNED_TASKS`) is its shaped score in `prefrl.envs.adroit` (the
`adroit:<task>-dense` envs' reward): gymnasium-robotics' dense reward with two fixes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prefrl.data.demos import DemoSet
from prefrl.demos.make import check_out, rollout_demo, save_demos
from prefrl.envs import make_env
from prefrl.envs.adroit import door_score, hammer_score, pen_score, relocate_score
from prefrl.rundir.config import check_fields, python_arguments


@dataclass(frozen=True)
class TaskPlan:
    score: Callable[[object], float]
    arm: tuple[str, ...]  # actuator name prefixes the plan drives directly (empty: all of them)
    thumb_grasps: bool  # whether the grasp level flexes the thumb too
    horizon: int
    noise: float


_ARM = ("A_AR",)
PLANNED_TASKS = {
    "adroit:door": TaskPlan(door_score, _ARM, thumb_grasps=False, horizon=20, noise=0.3),
    "adroit:pen": TaskPlan(pen_score, (), thumb_grasps=False, horizon=40, noise=0.1),
    "adroit:relocate": TaskPlan(relocate_score, _ARM, thumb_grasps=True, horizon=20, noise=0.3),
    "adroit:hammer": TaskPlan(hammer_score, (*_ARM, "A_WR"), thumb_grasps=True, horizon=20,
                              noise=0.3),
}  # fmt: skip


@dataclass(frozen=True)
class PlanConfig:
    samples: int = 32
    horizon: int | None = None  # (None: the task's own)
    noise: float | None = None  # std of the plan's variations (None: the task's own)
    temperature: float = 0.1  # of the weights, in standard deviations of the sampled returns
    knot_every: int = 4  # steps between independent noise draws

    def __post_init__(self) -> None:
        check_fields(self, {
            "samples": (self.samples >= 2, "an integer >= 2"),
            "horizon": (self.horizon is None or self.horizon >= 1, "a positive integer"),
            "noise": (self.noise is None or self.noise > 0, "> 0"),
            "temperature": (self.temperature > 0, "> 0"),
            "knot_every": (self.knot_every >= 1, "a positive integer"),
        }, "--")  # fmt: skip


def plan_basis(names: list[str], task: TaskPlan) -> np.ndarray:
    """(n_actions, plan dims) matrix from the plan's coordinates to the env's actions: one
    column per directly driven actuator, then one grasp column on the flexion joints (names
    ending in 0, 1 or 2); with no arm prefixes, the identity."""
    n = len(names)
    if not task.arm:
        return np.eye(n)
    direct = [j for j, name in enumerate(names) if name.startswith(task.arm)]
    flexion = [j for j, name in enumerate(names)
               if name[-1] in "012" and j not in direct
               and not name.startswith("A_WR") and (task.thumb_grasps or "TH" not in name)]  # fmt: skip
    basis = np.zeros((n, len(direct) + 1))
    basis[direct, np.arange(len(direct))] = 1.0
    basis[flexion, -1] = 1.0
    return basis


def smooth_noise(rng, samples: int, horizon: int, dims: int, std: float, every: int):
    """(samples, horizon, dims) Gaussian noise drawn every `every` steps and linearly
    interpolated between the draws."""
    knots = np.arange(0, horizon + every, every)
    weights = np.array([np.interp(np.arange(horizon), knots, np.eye(len(knots))[i])
                        for i in range(len(knots))]).T  # (horizon, knots)  # fmt: skip
    return np.einsum("hk,skd->shd", weights, std * rng.standard_normal((samples, len(knots), dims)))


def mppi_update(plans: np.ndarray, returns: np.ndarray, temperature: float) -> np.ndarray:
    """The plans' average weighted by exp((return - best) / (temperature * std))."""
    scale = temperature * (returns.std() + 1e-8)
    weights = np.exp((returns - returns.max()) / scale)
    return np.tensordot(weights / weights.sum(), plans, axes=1)


class MPPIPlanner:
    """`act(obs)` for `rollout_demo`: plans from the env's current state, then restores it."""

    def __init__(self, env, task: TaskPlan, config: PlanConfig, rng):
        self.env, self.task, self.rng = env, task, rng
        self.base = base = env.unwrapped
        self.horizon = config.horizon or task.horizon
        self.noise = config.noise or task.noise
        self.config = config
        names = [base.model.actuator(j).name for j in range(env.action_dim)]
        self.basis = plan_basis(names, task)
        if task.arm:  # the arm centred, the hand open
            start = np.zeros(self.basis.shape[1])
            start[-1] = -1.0
        else:  # the hand's current pose (the actuators are position servos)
            joints = base.model.jnt_qposadr[base.model.actuator_trnid[:, 0]]
            start = np.clip((base.data.qpos[joints] - base.act_mean) / base.act_rng, -1, 1)
        self.plan = np.tile(start, (self.horizon, 1))

    def __call__(self, obs) -> np.ndarray:
        env, base, cfg = self.env, self.base, self.config
        state = env.get_state()
        noise = smooth_noise(self.rng, cfg.samples, self.horizon, self.plan.shape[1], self.noise,
                             cfg.knot_every)  # fmt: skip
        noise[0] = 0.0  # (the current plan itself is one of the samples)
        plans = np.clip(self.plan + noise, -1, 1)
        # every sample's actuator targets at once (not one matrix product per simulated step)
        controls = base.act_mean + (plans @ self.basis.T) * base.act_rng
        returns = np.zeros(cfg.samples)
        for i, sample in enumerate(controls):
            env.set_state(state)
            for control in sample:
                base.do_simulation(control, base.frame_skip)
                returns[i] += self.task.score(base)
        env.set_state(state)
        self.plan = mppi_update(plans, returns, cfg.temperature)
        action = np.clip(self.basis @ self.plan[0], -1, 1).astype(np.float32)
        self.plan = np.concatenate([self.plan[1:], self.plan[-1:]])
        return action


@python_arguments()
def plan_demos(env: str, episodes: int = 5, *, out: str | Path | None = None,
               replace: bool = False, seed: int = 0, hold: int = 20, settle: int = 0,
               config: PlanConfig | None = None, max_tries: int | None = None,
               log: Callable[[str], None] = print) -> DemoSet:  # fmt: skip
    """Demos of an Adroit task (`PLANNED_TASKS`) planned with the simulator one reset seed at a
    time (`prefrl demos plan`; seeds `seed`, `seed + 1`, ..., `max_tries` at most, default 5 x
    `episodes`): the first `episodes` whose episode reaches a stable success. `config`: the
    planner's settings; `log`: where each seed's outcome is said; `out`, `replace`, `hold`,
    `settle`: as `script_demos`."""
    if env not in PLANNED_TASKS:
        raise ValueError(f"no planner for {env}: planned demos exist for "
                         f"{', '.join(PLANNED_TASKS)} (the built-in mazes: prefrl demos script; "
                         "other tasks: prefrl demos record)")  # fmt: skip
    if episodes < 1:
        raise ValueError(f"--episodes {episodes} is invalid: expected a positive integer")
    check_out(out, replace)
    cfg, task = config or PlanConfig(), PLANNED_TASKS[env]
    sim = make_env(env, seed=seed)
    demos, tried, limit = [], 0, max_tries or 5 * episodes
    try:
        while len(demos) < episodes and tried < limit:
            reset_seed = seed + tried
            tried += 1
            sim.reset(seed=reset_seed)
            planner = MPPIPlanner(sim, task, cfg, np.random.default_rng([seed, reset_seed]))
            info = {"source": "planned", "planner": "mppi", "seed": reset_seed}
            demo = rollout_demo(sim, planner, reset_seed, hold, info, settle)
            if demo is None:
                log(f"seed {reset_seed}: no stable success" + (" that settles" if settle else ""))
                continue
            log(f"seed {reset_seed}: first success at step {demo.first_success}, "
                f"{len(demo)} steps")  # fmt: skip
            demos.append(demo)
    finally:
        sim.close()
    if len(demos) < episodes:
        raise RuntimeError(f"the planner solved {len(demos)} of {tried} reset seeds "
                           f"({episodes} asked for): try --samples or --horizon higher"
                           + (", or --settle lower" if settle else ""))  # fmt: skip
    made = {**dataclasses.asdict(cfg),  # (with the task's own horizon and noise where None)
            "horizon": task.horizon if cfg.horizon is None else cfg.horizon,
            "noise": task.noise if cfg.noise is None else cfg.noise}  # fmt: skip
    return save_demos(DemoSet(env, demos, {"source": "planned", "planner": "mppi", "seed": seed,
                                           "hold": hold, "settle": settle, **made}),
                      out, replace)  # fmt: skip
