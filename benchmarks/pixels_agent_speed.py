"""Agent throughput on Pong: prefrl's A2C and PPO against Stable-Baselines3's, in one run.

Both train on the same envs (prefrl's Pong preprocessing, stepped one after another in the
training process, or with --env-workers K in K worker processes; SB3 gets them through a VecEnv
adapter), the same network (the Nature CNN with policy
and value heads) and the same batches: A2C 16 envs x 5 steps, RMSProp; PPO 8 envs x 128 steps,
4 epochs of 4 minibatches, Adam. The figure is emulator frames per second (agent steps x 4) of
training (acting, env steps and updates) after a warm-up: prefrl's from its loop's own
`train/steps_per_s` (its clock leaves out evaluations), SB3's from the time between its
rollouts. Rounds alternate prefrl and SB3 (load on the machine falls on both alike); the median
of each is reported with the ratio prefrl / SB3 (above 1: prefrl is faster).

    .venv-bench/bin/python benchmarks/pixels_agent_speed.py --rounds 3

Needs the bench and atari extras (`pip install -e '.[bench,atari]'`). Rows go to
benchmarks/results/pixels.json ("speed", what=agent_frames_per_s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from device_results import device_kind, results_path

RESULTS = Path(__file__).parent / "results" / "pixels.json"
FRAME_SKIP = 4
SETTINGS = {  # (envs, steps per env per update, agent steps timed after the warm-up)
    "a2c": {"n_envs": 16, "n_steps": 5, "warmup": 800, "timed": 4_000},
    "ppo": {"n_envs": 8, "n_steps": 128, "warmup": 1_024, "timed": 4_096},
}


def prefrl_steps_per_s(algo: str, workers: int) -> float:
    from prefrl.agents.a2c import A2CConfig
    from prefrl.agents.frame_ppo import FramePPOConfig
    from prefrl.rl.config import RLConfig
    from prefrl.rl.learner import train_rl
    from prefrl.rundir.metrics import read_metrics

    s = SETTINGS[algo]
    per_update = s["n_envs"] * s["n_steps"]
    with tempfile.TemporaryDirectory() as runs:
        config = RLConfig(env="atari:Pong", algo=algo, steps=s["warmup"] + s["timed"],
                          eval_interval=10**9, eval_episodes=1, video=False,
                          checkpoint_interval=10**9, log_interval=per_update,
                          a2c=A2CConfig(n_envs=s["n_envs"], n_steps=s["n_steps"]),
                          ppo_frames=FramePPOConfig(n_envs=s["n_envs"], n_steps=s["n_steps"]),
                          env_workers=workers, runs_dir=Path(runs), name="speed",
                          progress=False)  # fmt: skip
        train_rl(config)
        rows = [r for r in read_metrics(Path(runs) / "speed") if "train/steps_per_s" in r]
    timed = [r for r in rows if r["step"] > s["warmup"]]
    seconds = sum(per_update / r["train/steps_per_s"] for r in timed)
    return len(timed) * per_update / seconds


class PrefrlPong:
    """prefrl's Pong envs (a `FrameVectorEnv`, its envs here or in worker processes) as an SB3
    VecEnv (channels-last uint8 stacks, as prefrl's agents see them; SB3 transposes them for its
    CNN)."""

    @staticmethod
    def make(n_envs: int, workers: int, seed: int = 0):
        import gymnasium as gym
        from stable_baselines3.common.vec_env import VecEnv

        from prefrl.envs import FrameVectorEnv, make_pixel_env
        from prefrl.envs.pool import seeded

        class Adapter(VecEnv):
            def __init__(self):
                self.envs = FrameVectorEnv(seeded(make_pixel_env, "atari:Pong", seed), n_envs,
                                           workers)  # fmt: skip
                obs_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
                super().__init__(n_envs, obs_space, gym.spaces.Discrete(self.envs.n_actions))
                self._actions = np.zeros(n_envs, np.int64)

            def reset(self):
                return self.envs.reset()

            def step_async(self, actions):
                self._actions = actions

            def step_wait(self):
                obs, rewards, terminated, truncated, final = self.envs.step(self._actions)
                dones = terminated | truncated
                infos = [{"TimeLimit.truncated": bool(tr and not te)}
                         for te, tr in zip(terminated, truncated, strict=True)]  # fmt: skip
                for i in np.flatnonzero(dones):
                    infos[i]["terminal_observation"] = final[i]
                return obs, rewards, dones, infos

            def close(self):
                self.envs.close()

            def get_attr(self, name, indices=None):
                return [None] * n_envs

            def set_attr(self, name, value, indices=None):
                pass

            def env_method(self, name, *args, indices=None, **kwargs):
                return [None] * n_envs

            def env_is_wrapped(self, wrapper_class, indices=None):
                return [False] * n_envs

            def seed(self, seed=None):
                return [None] * n_envs

        return Adapter()


def sb3_steps_per_s(algo: str, workers: int, device: str) -> float:
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback

    s = SETTINGS[algo]
    env = PrefrlPong.make(s["n_envs"], workers)
    if algo == "a2c":
        model = A2C("CnnPolicy", env, n_steps=s["n_steps"], learning_rate=7e-4, gamma=0.99,
                    gae_lambda=1.0, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                    rms_prop_eps=1e-5, device=device, seed=0)  # fmt: skip
    else:
        model = PPO("CnnPolicy", env, n_steps=s["n_steps"], batch_size=s["n_envs"] * 32,
                    n_epochs=4, learning_rate=2.5e-4, clip_range=0.1, ent_coef=0.01,
                    vf_coef=0.5, max_grad_norm=0.5, device=device, seed=0)  # fmt: skip

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.marks: list[tuple[int, float]] = []

        def _on_rollout_start(self) -> None:  # (after the previous update)
            self.marks.append((self.num_timesteps, time.perf_counter()))

        def _on_step(self) -> bool:
            return True

    clock = Clock()
    model.learn(s["warmup"] + s["timed"] + s["n_envs"] * s["n_steps"], callback=clock)
    env.close()
    marks = [m for m in clock.marks if m[0] >= s["warmup"]]
    (step0, t0), (step1, t1) = marks[0], marks[-1]
    return (step1 - step0) / (t1 - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--algos", nargs="+", default=["a2c", "ppo"], choices=list(SETTINGS))
    parser.add_argument("--env-workers", type=int, default=0,
                        help="processes both step the envs in (0: the training process)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import torch

    kind = device_kind()  # (SB3 gets the same kind of device as JAX)
    peer_device = "cpu" if kind == "cpu" else "cuda"
    rows = []
    for algo in args.algos:
        ours, theirs = [], []
        for r in range(args.rounds):
            ours.append(prefrl_steps_per_s(algo, args.env_workers))
            theirs.append(sb3_steps_per_s(algo, args.env_workers, peer_device))
            print(f"{algo} round {r}: prefrl {ours[-1] * FRAME_SKIP:.0f} frames/s, "
                  f"SB3 {theirs[-1] * FRAME_SKIP:.0f} frames/s", flush=True)  # fmt: skip
        prefrl_fps = float(np.median(ours)) * FRAME_SKIP
        sb3_fps = float(np.median(theirs)) * FRAME_SKIP
        rows.append({"what": "agent_frames_per_s", "algo": algo, "prefrl": prefrl_fps,
                     "peer": "sb3", "peer_value": sb3_fps, "ratio": prefrl_fps / sb3_fps,
                     "unit": "frames/s", "env": "atari:Pong", **{k: SETTINGS[algo][k] for k in
                     ("n_envs", "n_steps")}, "env_workers": args.env_workers, "rounds": args.rounds,
                     "peer_version": f"stable-baselines3 {__import__('stable_baselines3').__version__}, "
                                     f"torch {torch.__version__} ({torch.get_num_threads()} threads, "
                                     f"{peer_device})",
                     "device": kind, "command": "python benchmarks/pixels_agent_speed.py "
                     + " ".join(sys.argv[1:])})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    out = results_path(args.out, kind)
    old = json.loads(out.read_text()) if out.exists() else {}
    keep = [r for r in old.get("speed", []) if r["what"] != "agent_frames_per_s"
            or (r["algo"], r.get("env_workers", 0)) not in {(a, args.env_workers) for a in args.algos}]  # fmt: skip
    old["speed"] = keep + rows
    old["agent_speed_command"] = "python benchmarks/pixels_agent_speed.py " + " ".join(sys.argv[1:])
    old["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    out.write_text(json.dumps(old, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
