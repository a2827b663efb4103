"""Why does an RFCL run's reverse curriculum stall? Plays a checkpoint's policy from each demo's
start frontier, with the stage-1 time limit of the run and with longer ones, and says when the
task is first solved and whether it is still solved at the episode's last step (what moves the
frontier).

    python tools/rfcl_frontier.py logs/rfcl-bench/runs/adroit-door_rfcl_d5_s0 --demos 4 1
    python tools/rfcl_frontier.py logs/rfcl-bench/runs/adroit-door_rfcl_d5_s0 --start-at 0

With `--checkpoint` a checkpoint other than the run's latest; the frontier is the checkpoint's.
With `--start-at N` every demo's state N instead of its frontier (0: the demo's own first
state, what a solved demo needs); the time limits are then those of a start there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import numpy as np

from prefrl.demos.rfcl import RFCLConfig, load_demos
from prefrl.envs import make_env
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.training.policies import load_policy


def play(env, policy, state, limit: int, deterministic: bool, episode: int):
    """(success at the last step, the first step with success or None)."""
    env.reset(seed=episode)
    obs = env.set_state(state)
    key, first, success = jax.random.key(episode, impl="rbg"), None, False
    for t in range(limit):
        action = policy(obs) if deterministic else policy.sample(obs, key, t)
        obs, _, _, _, info = env.step(action)
        success = bool(info["success"])
        if success and first is None:
            first = t + 1
    return success, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--demos", type=int, nargs="+", help="which demos (default: all)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--start-at", type=int, help="this state of each demo, not its frontier")
    args = parser.parse_args()
    if args.start_at is not None and args.start_at < 0:
        parser.error(f"--start-at {args.start_at}: expected a state index >= 0")

    ckpt = args.checkpoint or latest_checkpoint(args.run)
    if ckpt is None or not (ckpt / "loop.json").is_file():
        parser.error(f"{args.checkpoint or args.run} is not an RFCL run with a checkpoint")
    policy = load_policy(ckpt)
    config = policy.config
    if not isinstance(config, RFCLConfig):
        parser.error(f"{ckpt} is a checkpoint of {type(config).__name__}, not of an RFCL run")
    env = make_env(config.env, seed=0)
    demos = load_demos(config, env)
    wrong = [i for i in args.demos or [] if not 0 <= i < len(demos)]
    if wrong:
        parser.error(f"--demos {wrong}: the run has demos 0-{len(demos) - 1}")
    frontier = json.loads((ckpt / "loop.json").read_text())["reverse"]["frontier"]
    print(f"{ckpt}: time limit 16 + steps left // {config.reverse_time_divisor}")
    for i in args.demos if args.demos is not None else range(len(demos)):
        demo = demos[i]
        start = frontier[i] if args.start_at is None else min(args.start_at, len(demo.states) - 1)
        steps_left = len(demo.states) - start
        print(f"demo {i}: {len(demo.states)} states, first success at step {demo.first_success}, "
              f"{'frontier' if args.start_at is None else 'start'} at state {start} (frontier "
              f"{frontier[i]}; the demo solves it {demo.first_success - start} steps later)")  # fmt: skip
        for limit in sorted({16 + steps_left // config.reverse_time_divisor, 16 + steps_left,
                             env.max_episode_steps}):  # fmt: skip
            for deterministic in (True, False):
                played = [play(env, policy, demo.states[start], limit, deterministic, e)
                          for e in range(args.episodes)]  # fmt: skip
                firsts = [f for _, f in played if f is not None]
                print(f"  limit {limit:3d}, {'deterministic' if deterministic else 'sampled':>13}:"
                      f" solved at the end {sum(s for s, _ in played)}/{args.episodes}, at some "
                      f"step {len(firsts)}/{args.episodes}"
                      + (f" (first at step {int(np.median(firsts))}, median)" if firsts else ""))  # fmt: skip
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
