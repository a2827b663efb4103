"""Agent steps/s of 16 preprocessed Atari envs (no-op starts, skip 4 + max-pool, grey 84x84,
stack 4), random actions, four ways in one run:

- `prefrl`: prefrl's `PixelEnv`s stepped one after another (`FrameVectorEnv`), with state
  save/restore and the score blanked;
- `prefrl-2-workers`: the same envs split over two worker processes (`--env-workers 2`);
- `gymnasium`: Gymnasium's `AtariPreprocessing` + `FrameStackObservation` (OpenCV resize) in a
  `SyncVectorEnv`;
- `ale-threaded`: ale-py's `AtariVectorEnv` (C++, a thread per core; no per-env state
  save/restore, so clips could not be replayed).

    python benchmarks/atari_envs.py --game Pong --steps 200 --rounds 3

Rounds alternate the four; the median round is reported. Rows go to
benchmarks/results/pixels.json ("env_speed").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from device_results import put_rows

RESULTS = Path(__file__).parent / "results" / "pixels.json"
N = 16


def prefrl_envs(game: str, workers: int = 0):
    from prefrl.envs import FrameVectorEnv, make_pixel_env
    from prefrl.envs.pool import seeded

    envs = FrameVectorEnv(seeded(make_pixel_env, f"atari:{game}", 0), N, workers)
    envs.reset()
    n_actions = envs.n_actions
    return lambda a: envs.step(a % n_actions), envs.close


def gymnasium_envs(game: str):
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)

    def make():
        env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
        return gym.wrappers.FrameStackObservation(env, 4)

    envs = gym.vector.SyncVectorEnv([make for _ in range(N)])
    envs.reset(seed=0)
    n_actions = envs.single_action_space.n
    return lambda a: envs.step(a % n_actions), envs.close


def ale_threaded_envs(game: str):
    from ale_py.vector_env import AtariVectorEnv

    envs = AtariVectorEnv(game.lower(), N, reward_clipping=False, use_fire_reset=False)
    envs.reset(seed=0)
    n_actions = envs.single_action_space.n
    return lambda a: envs.step(a % n_actions), envs.close


WAYS = {
    "prefrl": prefrl_envs,
    "prefrl-2-workers": lambda game: prefrl_envs(game, workers=2),
    "gymnasium": gymnasium_envs,
    "ale-threaded": ale_threaded_envs,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--steps", type=int, default=200, help="vector steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    made = {name: make(args.game) for name, make in WAYS.items()}
    actions = np.random.default_rng(0).integers(0, 18, (args.steps, N))
    rates: dict[str, list[float]] = {name: [] for name in WAYS}
    for _ in range(args.rounds):
        for name, (step, _) in made.items():
            start = time.perf_counter()
            for a in actions:
                step(a)
            rates[name].append(args.steps * N / (time.perf_counter() - start))
    rows = [{"what": f"{args.game} agent steps/s ({N} envs)", "way": name,
             "steps_per_s": float(np.median(r)), "cores": os.cpu_count()}
            for name, r in rates.items()]  # fmt: skip
    for row in rows:
        print(f"{row['way']:>16}: {row['steps_per_s']:8.0f} agent steps/s", flush=True)
    for _, close in made.values():
        close()
    put_rows(args.out, "env_speed", rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
