"""Does prefrl's MetaWorld (metaworld 3.1.1 on MuJoCo 3.17, welds padded) behave as MetaWorld on
the MuJoCo it pins (3.3.0)?

    python tools/metaworld_check.py --side-python .venv-mw/bin/python

For every v3 task: the same seeded reset and the same 500 seeded random actions, in a side
environment holding metaworld 3.1.1 with MuJoCo 3.3.0 (made once: `python3.11 -m venv
.venv-mw && .venv-mw/bin/pip install metaworld==3.1.1 packaging`; never the test environment)
and in prefrl's own (`prefrl.envs.metaworld.MetaWorldTask`). It compares observations, rewards
and success flags step by step and writes, per task, the largest differences, the first step
where the observation differs by more than `--tolerance`, and whether the task agrees: its
observations within the tolerance at every step, its rewards within 1e3 times it (they are sums
of products of those observations) and the same success flags. Results go to
benchmarks/results/metaworld_check.json; the tasks that disagree belong in
`prefrl.envs.metaworld.DIFFERS`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def task_names() -> list[str]:
    sys.path.insert(0, str(ROOT / "src"))
    from prefrl.envs.metaworld import TASKS

    return list(TASKS)


def record(tasks: list[str], steps: int, seed: int, prefrl_env: bool,
           scripted_episodes: int) -> dict[str, np.ndarray]:  # fmt: skip
    """Observations, rewards and successes of each task's seeded episode of random actions."""
    import mujoco

    if prefrl_env:
        sys.path.insert(0, str(ROOT / "src"))
        from prefrl.envs.metaworld import MetaWorldTask
    else:
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE as classes
    out = {"mujoco": np.array(mujoco.__version__)}
    for task in tasks:
        actions = np.random.default_rng(seed).uniform(-1, 1, (steps, 4)).astype(np.float32)
        if prefrl_env:
            env = MetaWorldTask(task)
            obs, _ = env.reset(seed=seed)
        else:
            env = classes[f"{task}-v3-goal-observable"](seed=seed)
            env._freeze_rand_vec, env.seeded_rand_vec = False, True
            env.seed(seed)
            obs, _ = env.reset()
        step = env.step
        base = env.mw if prefrl_env else env
        observations, rewards, successes, states = [obs], [], [], [sim_state(base)]
        for action in actions:
            obs, reward, _, _, info = step(action)
            observations.append(obs)
            rewards.append(reward)
            successes.append(bool(info["success"]))
            states.append(sim_state(base))
        out[f"{task}/obs"] = np.asarray(observations, np.float64)
        out[f"{task}/reward"] = np.asarray(rewards, np.float64)
        out[f"{task}/success"] = np.asarray(successes)
        out[f"{task}/state"] = np.asarray(states)
        out[f"{task}/rand_vec"] = np.asarray(base._last_rand_vec, np.float64)
        out[f"{task}/scripted_first"] = np.asarray([
            scripted_first_success(task, env, prefrl_env, seed + i, steps)
            for i in range(scripted_episodes)])  # fmt: skip
    return out


def scripted_policy(task: str):
    """MetaWorld's own scripted policy of a task (`metaworld.policies`; as
    `prefrl.envs.metaworld.scripted_policy`, written here again: the side environment that runs
    this holds no prefrl)."""
    from metaworld import policies

    name = "Sawyer" + task.title().replace("-", "").replace("PegInsert", "PegInsertion")
    return getattr(policies, name + "V3Policy")()


def scripted_first_success(task: str, env, prefrl_env: bool, seed: int, steps: int) -> int:
    """The first step at which MetaWorld's scripted policy succeeds from the reset of `seed`
    (-1: not within `steps`)."""
    policy = scripted_policy(task)
    if prefrl_env:
        obs, _ = env.reset(seed=seed)
    else:
        env.seed(seed)
        obs, _ = env.reset()
    for t in range(steps):
        obs, _, _, _, info = env.step(np.asarray(policy.get_action(obs), np.float32))
        if info["success"]:
            return t
    return -1


SIM_FIELDS = ("qpos", "qvel", "act", "qacc_warmstart", "ctrl", "mocap_pos", "mocap_quat")
"""What a step reads, by the names both MuJoCo versions share (their packed states differ)."""


def sim_state(base) -> np.ndarray:
    data = base.data
    return np.concatenate([[data.time], *(getattr(data, f).ravel() for f in SIM_FIELDS)])


def one_step(pinned: dict, tasks: list[str], steps: int, seed: int) -> dict[str, np.ndarray]:
    """prefrl's env stepped from each of the pinned run's states in turn, with its action:
    each step's own difference, without the earlier steps' differences carried along."""
    import mujoco

    sys.path.insert(0, str(ROOT / "src"))
    from prefrl.envs.metaworld import MetaWorldTask

    out = {}
    for task in tasks:
        actions = np.random.default_rng(seed).uniform(-1, 1, (steps, 4)).astype(np.float32)
        env = MetaWorldTask(task)
        env.reset(seed=seed)
        mw, data = env.mw, env.mw.data
        if not np.array_equal(mw._last_rand_vec, pinned[f"{task}/rand_vec"]):
            raise RuntimeError(f"{task}: the two resets drew different placements")
        observations, rewards, successes = [], [], []
        for t, action in enumerate(actions):
            state = pinned[f"{task}/state"][t]
            data.time, at = state[0], 1
            for field in SIM_FIELDS:
                array = getattr(data, field)
                array.ravel()[:] = state[at : at + array.size]
                at += array.size
            mujoco.mj_forward(mw.model, data)
            mw._prev_obs = pinned[f"{task}/obs"][t][:18].copy()
            obs, reward, _, _, info = env.step(action)
            observations.append(obs)
            rewards.append(reward)
            successes.append(bool(info["success"]))
        out[f"{task}/obs"] = np.asarray(observations)
        out[f"{task}/reward"] = np.asarray(rewards)
        out[f"{task}/success"] = np.asarray(successes)
    return out


QUATERNIONS = np.zeros(39, bool)
QUATERNIONS[[7, 8, 9, 10, 14, 15, 16, 17]] = True
QUATERNIONS[18:36] = QUATERNIONS[:18]
"""The orientations of the objects (quaternions) in an observation; the rest are positions in
metres and the gripper's opening."""


_PARTS = ["hand x", "hand y", "hand z", "gripper", *(f"object {i}'s {what}" for i in (1, 2)
          for what in ("x", "y", "z", "quaternion w", "quaternion x", "quaternion y",
                       "quaternion z"))]  # fmt: skip
OBS_NAMES = [*_PARTS, *(f"previous {p}" for p in _PARTS), "goal x", "goal y", "goal z"]


def worst(a: np.ndarray, b: np.ndarray, quaternion_tolerance: float, tolerance: float) -> str:
    """The observation entry furthest over its tolerance, and by how much it differs."""
    scale = np.where(QUATERNIONS, quaternion_tolerance, tolerance)
    gap = np.abs(a - b).reshape(-1, a.shape[-1])
    step, index = np.unravel_index(np.argmax(gap / scale), gap.shape)
    unit = "" if QUATERNIONS[index] else " m"
    return f"{OBS_NAMES[index]} by {gap[step, index]:.2g}{unit}"


def gaps(a: np.ndarray, b: np.ndarray, quaternion_tolerance: float, tolerance: float):
    """Per step, the largest difference relative to its tolerance (1: at the tolerance)."""
    scale = np.where(QUATERNIONS, quaternion_tolerance, tolerance)
    return (np.abs(a - b) / scale).max(axis=-1)


def compare(pinned: dict, ours: dict, stepped: dict, task: str, tolerance: float,
            quaternion_tolerance: float, scripted_rate_tolerance: float) -> dict:  # fmt: skip
    obs_gap = np.abs(pinned[f"{task}/obs"] - ours[f"{task}/obs"]).max(axis=1)
    reward_gap = np.abs(pinned[f"{task}/reward"] - ours[f"{task}/reward"])
    step_obs_gap = np.abs(pinned[f"{task}/obs"][1:] - stepped[f"{task}/obs"]).max(axis=1)
    reset_gap = gaps(pinned[f"{task}/obs"][0], ours[f"{task}/obs"][0], quaternion_tolerance,
                     tolerance)  # fmt: skip
    step_gap = gaps(pinned[f"{task}/obs"][1:], stepped[f"{task}/obs"], quaternion_tolerance,
                    tolerance)  # fmt: skip
    scripted = pinned[f"{task}/scripted_first"], ours[f"{task}/scripted_first"]
    rates = [float((s >= 0).mean()) for s in scripted]
    step_reward_gap = np.abs(pinned[f"{task}/reward"] - stepped[f"{task}/reward"])
    step_success_differs = int((pinned[f"{task}/success"] != stepped[f"{task}/success"]).sum())
    over = np.flatnonzero(step_gap > 1.0)
    row = {
        "reset_obs_difference": float(obs_gap[0]),
        "step_max_obs_difference": float(step_obs_gap.max()),
        "step_max_reward_difference": float(step_reward_gap.max()),
        "step_first_over_tolerance": int(over[0]) if len(over) else None,
        "step_success_differs": step_success_differs,
        "run_max_obs_difference": float(obs_gap.max()),
        "run_max_reward_difference": float(reward_gap.max()),
        "run_success_differs": int((pinned[f"{task}/success"] != ours[f"{task}/success"]).sum()),
        "successes_pinned": int(pinned[f"{task}/success"].sum()),
        "reset_over_tolerance": float(reset_gap),
        "step_most_over_tolerance": float(step_gap.max()),
        "scripted_success_rate": rates,
        "scripted_first_success": [s.tolist() for s in scripted],
    }
    why = []
    if reset_gap > 1.0:
        why.append("resets with " + worst(pinned[f"{task}/obs"][0], ours[f"{task}/obs"][0],
                                          quaternion_tolerance, tolerance))  # fmt: skip
    if len(over):
        why.append("steps with " + worst(pinned[f"{task}/obs"][1:], stepped[f"{task}/obs"],
                                         quaternion_tolerance, tolerance))  # fmt: skip
    if step_success_differs:
        why.append(f"says success differently at {step_success_differs} steps")
    if abs(rates[0] - rates[1]) > scripted_rate_tolerance:
        why.append(f"its scripted policy succeeds from {rates[1]:.0%} of the resets, on "
                   f"MuJoCo 3.3.0 from {rates[0]:.0%}")  # fmt: skip
    row["agrees"], row["differs"] = not why, "; ".join(why)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side-python", default=str(ROOT / ".venv-mw/bin/python"),
                        help="the interpreter of the side environment (MuJoCo 3.3.0)")  # fmt: skip
    parser.add_argument("--tasks", nargs="*", help="default: all 50 v3 tasks")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest difference of a position (m) counted as the same")  # fmt: skip
    parser.add_argument("--quaternion-tolerance", type=float, default=1e-2,
                        help="largest difference of an orientation's quaternion component "
                             "counted as the same (0.01: about 1 degree)")  # fmt: skip
    parser.add_argument("--results", default=str(ROOT / "benchmarks/results/metaworld_check.json"))
    parser.add_argument(
        "--scripted-episodes",
        type=int,
        default=10,
        help="resets (seeds from --seed) MetaWorld's scripted policy runs from",
    )
    parser.add_argument(
        "--scripted-rate-tolerance",
        type=float,
        default=0.2,
        help="largest difference of the scripted policy's success rates",
    )
    parser.add_argument("--record", help=argparse.SUPPRESS)  # (what the side process runs)
    parser.add_argument("--prefrl-env", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    tasks = args.tasks or task_names()
    if args.record:
        np.savez_compressed(
            args.record,
            **record(tasks, args.steps, args.seed, args.prefrl_env, args.scripted_episodes),
        )
        return
    if not Path(args.side_python).exists():
        parser.error(f"--side-python {args.side_python} is not there: make the side environment "
                     "first (see this file's docstring)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        side = os.path.join(tmp, "pinned.npz")
        command = [args.side_python, __file__, "--record", side, "--steps", str(args.steps),
                   "--seed", str(args.seed), "--scripted-episodes", str(args.scripted_episodes),
                   "--tasks", *tasks]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run(command, check=True, env=env)
        pinned = dict(np.load(side))
    ours = record(tasks, args.steps, args.seed, True, args.scripted_episodes)
    stepped = one_step(pinned, tasks, args.steps, args.seed)
    rows = {
        task: compare(
            pinned,
            ours,
            stepped,
            task,
            args.tolerance,
            args.quaternion_tolerance,
            args.scripted_rate_tolerance,
        )
        for task in tasks
    }
    for task, row in rows.items():
        print(f"{task:26s} {'agrees' if row['agrees'] else 'DIFFERS'}"
              f"  reset {row['reset_obs_difference']:.1e}"
              f"  step obs {row['step_max_obs_difference']:.1e}"
              f"  reward {row['step_max_reward_difference']:.1e}"
              f"  success {row['step_success_differs']}"
              f"  | run obs {row['run_max_obs_difference']:.1e}"
              f"  reward {row['run_max_reward_difference']:.1e}"
              f"  success {row['run_success_differs']}"
              f"  | scripted success {row['scripted_success_rate']}")  # fmt: skip
    result = {
        "command": "python tools/metaworld_check.py " + " ".join(sys.argv[1:]),
        "metaworld": "3.1.1",
        "mujoco_pinned": str(pinned["mujoco"]),
        "mujoco_prefrl": str(ours["mujoco"]),
        "steps": args.steps, "seed": args.seed, "tolerance": args.tolerance,
        "quaternion_tolerance": args.quaternion_tolerance,
        "scripted_episodes": args.scripted_episodes,
        "scripted_rate_tolerance": args.scripted_rate_tolerance,
        "processor": platform.processor() or platform.machine(),
        "agree": sorted(t for t, r in rows.items() if r["agrees"]),
        "differ": sorted(t for t, r in rows.items() if not r["agrees"]),
        "tasks": [{"task": task, **row} for task, row in rows.items()],
    }  # fmt: skip
    Path(args.results).write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(result['agree'])} of {len(rows)} tasks agree; written to {args.results}")


if __name__ == "__main__":
    main()
