"""Reaching against holding: plays each run's latest policy (deterministic actions) from the
task's own starts and says how many episodes reach a success at some step, how many still
succeed at the last step, and how long the others held it; on `adroit:pen`, also how many of
those dropped the pen (its height under 0.075, gymnasium-robotics' own test); on `adroit:door`,
how fast the door swung (the hinge's peak speed) in the episodes that kept it open and in those
whose door swung back under 1.35 rad, and with `--door-demos DIR`, in each demo of DIR.

    python tools/rfcl_holding.py logs/rfcl-bench/runs/adroit-pen_{rfcl,sac-demos,sac}_d5_s1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from prefrl.data.demos import load_demos_of
from prefrl.envs import make_env
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.training.policies import load_policy

PEN_DROPPED_BELOW = 0.075


def hinge_speed(door) -> float:
    """The door hinge's speed now, rad/s (`door`: the unwrapped Adroit door env)."""
    return abs(float(door.data.qvel[door.door_hinge_addrs]))


def play(env, policy, seed: int) -> tuple[np.ndarray, bool, float]:
    """(success at each step, whether the pen fell: False on other envs, the door hinge's peak
    speed in rad/s: 0 on other envs)."""
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    successes, dropped, swing = [], False, 0.0
    for _ in range(env.max_episode_steps):
        obs, _, _, _, info = env.step(policy(obs))
        successes.append(bool(info["success"]))
        if env.env_id == "adroit:pen":
            dropped |= base.data.body("Object").xpos[2] < PEN_DROPPED_BELOW
        if env.env_id == "adroit:door":
            swing = max(swing, hinge_speed(base))
    return np.array(successes), dropped, swing


def door_demo_swings(path: Path) -> None:
    """Each door demo's hinge peak speed and final angle, read from its recorded states."""
    env = make_env("adroit:door", seed=0)
    base = env.unwrapped
    for i, demo in enumerate(load_demos_of(path, "adroit:door", env).demos):
        speeds = []
        for state in demo.states:
            env.set_state(state)
            speeds.append(hinge_speed(base))
        angle = float(base.data.qpos[base.door_hinge_addrs])
        print(f"{path} demo {i}: the hinge's peak speed {max(speeds):.1f} rad/s, "
              f"{angle:.2f} rad at the end")  # fmt: skip
    env.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="*")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5000, help="reset seeds seed, seed+1, ...")
    parser.add_argument("--door-demos", type=Path, help="adroit:door demos to measure too")
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes {args.episodes}: expected a positive integer")
    if not args.runs and args.door_demos is None:
        parser.error("give run directories, --door-demos, or both")
    if args.door_demos is not None:
        if not args.door_demos.is_dir():
            parser.error(f"--door-demos {args.door_demos}: no such demo folder")
        door_demo_swings(args.door_demos)
    for run in args.runs:
        ckpt = latest_checkpoint(run)
        if ckpt is None:
            parser.error(f"{run}: no checkpoint")
        policy = load_policy(ckpt)
        env = make_env(policy.config.env, seed=0)
        played = [play(env, policy, args.seed + e) for e in range(args.episodes)]
        reached = [(s, d) for s, d, _ in played if s.any()]
        held = sum(s[-1] for s, _ in reached)
        lost = [(s, d) for s, d in reached if not s[-1]]
        line = (f"{run.name} ({ckpt.name}): reached {len(reached)}/{args.episodes}, "
                f"at the last step {held}/{args.episodes}")  # fmt: skip
        if reached:
            line += (
                f"; first success at step {int(np.median([s.argmax() + 1 for s, _ in reached]))}"
            )
        if lost:
            line += (f"; the {len(lost)} that lost it: {int(np.median([s.sum() for s, _ in lost]))}"
                     " steps at the target (median)")  # fmt: skip
            if env.env_id == "adroit:pen":
                line += f", {sum(d for _, d in lost)} dropped the pen"
        if env.env_id == "adroit:door":
            kept = [w for s, _, w in played if s[-1]]
            back = [w for s, _, w in played if s.any() and not s[-1]]
            line += "; the hinge's peak speed (median, range)" + "".join(
                f", {name} {np.median(w):.1f} ({min(w):.1f}-{max(w):.1f}) rad/s"
                for name, w in (("kept open", kept), ("swung back", back))
                if w
            )
        print(line)
        env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
