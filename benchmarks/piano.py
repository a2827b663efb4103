"""The piano task in one invocation: prefrl's wrapping cost against raw robopianist, a clip with
sound (render + synthesise + encode), and the `robopianist-debug` preset's key-press F1 against a
random policy and its own first evaluation, with the time it took.

    python benchmarks/piano.py
    python benchmarks/piano.py --skip-training     # only the speed figures

Steps/s: the same song, task settings and uniform-random action sequence through robopianist's
own environment (`suite.load` with the same task kwargs: a dm_env) and through
`make_env("robopianist:...")` (flat observations, [-1, 1] actions, key-press tracking); both
interleaved in rounds, median of `--rounds`. The clip: `--clip-seconds` of a random rollout's
states re-rendered at 256x256 with their synthesised sound, written as H.264 + AAC mp4.
Writes benchmarks/results/piano.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import av
import numpy as np

from prefrl.envs import make_env
from prefrl.envs.piano_task import PianoTask, parse_piano_id, quiet_import
from prefrl.feedback.clips import ClipRenderer
from prefrl.presets import RL_PRESETS
from prefrl.rundir.metrics import read_metrics
from prefrl.training.evaluate import evaluate, make_eval_envs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks/results/piano.json"


def raw_env(song: str, task: PianoTask, seed: int):
    quiet_import()
    from robopianist import suite

    return suite.load(f"RoboPianist-{song}-v0", seed=seed, task_kwargs=task.task_kwargs())


def time_raw(env, actions: np.ndarray) -> float:
    spec = env.action_spec()
    scaled = spec.minimum + (actions + 1) / 2 * (spec.maximum - spec.minimum)
    env.reset()
    start = time.perf_counter()
    for a in scaled:
        if env.step(a).last():
            env.reset()
    return len(actions) / (time.perf_counter() - start)


def time_prefrl(env, actions: np.ndarray) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for a in actions:
        *_, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - start)


def steps_per_s(env_id: str, steps: int, rounds: int) -> tuple[float, float]:
    song, task = parse_piano_id(env_id.split(":", 1)[1])
    raw, wrapped = raw_env(song, task, 0), make_env(env_id, seed=0)
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, wrapped.action_dim))
    time_raw(raw, actions[:50]), time_prefrl(wrapped, actions[:50])  # warm-up
    raw_rates, prefrl_rates = [], []
    for _ in range(rounds):
        raw_rates.append(time_raw(raw, actions))
        prefrl_rates.append(time_prefrl(wrapped, actions))
    wrapped.close()
    return float(np.median(prefrl_rates)), float(np.median(raw_rates))


def clip_with_sound(env_id: str, seconds: float) -> dict:
    env = make_env(env_id, seed=0)
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    states = []
    while len(states) < round(seconds * env.fps):
        states.append(env.get_state())
        *_, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_dim))
        if terminated or truncated:
            env.reset()
    renderer = ClipRenderer(env_id, size=256)
    with tempfile.TemporaryDirectory() as tmp:
        renderer.write(Path(tmp) / "warm.mp4", np.stack(states[:5]))  # GL context, encoders
        start = time.perf_counter()
        frames = renderer.write(Path(tmp) / "clip.mp4", np.stack(states))
        took = time.perf_counter() - start
        with av.open(str(Path(tmp) / "clip.mp4")) as f:
            streams = sorted(s.codec_context.name for s in f.streams)
    renderer.close()
    if streams != ["aac", "h264"]:
        raise RuntimeError(f"the clip has streams {streams}, expected H.264 video and AAC audio")
    return {"clip_seconds": seconds, "clip_frames": frames, "clip_write_s": took}


def random_f1(env_id: str, episodes: int) -> float:
    envs = make_eval_envs(env_id, episodes, None)
    rng = np.random.default_rng(2)
    result = evaluate(lambda o: rng.uniform(-1, 1, (len(o), envs[0].action_dim)), envs, 0)
    for env in envs:
        env.close()
    return result.extra["eval/f1_mean"]


def train_debug(runs: Path) -> dict:
    from prefrl.rl.learner import train_rl

    config = RL_PRESETS["robopianist-debug"].config
    run = runs / "piano-debug"
    config = dataclasses.replace(config, runs_dir=runs, name=run.name, progress=False,
                                 resume=run if (run / "config.json").exists() else None)  # fmt: skip
    start = time.perf_counter()
    train_rl(config)
    minutes = (time.perf_counter() - start) / 60
    rows = [r for r in read_metrics(run) if "eval/f1_mean" in r]
    return {
        "env": config.env,
        "steps": config.steps,
        "f1_first_eval": rows[0]["eval/f1_mean"],
        "f1_first_eval_step": rows[0]["step"],
        "f1_final": rows[-1]["eval/f1_mean"],
        "f1_curve": [(r["step"], r["eval/f1_mean"]) for r in rows],
        "minutes": minutes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="robopianist:debug-TwinkleTwinkleRousseau")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clip-seconds", type=float, default=10.0)
    parser.add_argument("--random-episodes", type=int, default=5)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--runs-dir", default=str(ROOT / "runs/bench-piano"))
    args = parser.parse_args()
    out = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out["command"] = "python benchmarks/piano.py " + " ".join(sys.argv[1:])
    prefrl_rate, raw_rate = steps_per_s(args.env, args.steps, args.rounds)
    out.update(prefrl_steps_per_s=prefrl_rate, raw_steps_per_s=raw_rate,
               wrapping_cost=1 - prefrl_rate / raw_rate)  # fmt: skip
    print(f"steps/s: prefrl {prefrl_rate:.1f}, raw robopianist {raw_rate:.1f} "
          f"(prefrl/raw {prefrl_rate / raw_rate:.3f})")  # fmt: skip
    out.update(clip_with_sound(args.env, args.clip_seconds))
    print(f"{args.clip_seconds:.0f} s clip with sound (256x256): {out['clip_write_s']:.2f} s")
    out["f1_random"] = random_f1(args.env, args.random_episodes)
    print(f"random policy: key-press F1 {out['f1_random']:.3f}")
    if not args.skip_training:
        out.update(train_debug(Path(args.runs_dir)))
        print(f"robopianist-debug: F1 {out['f1_first_eval']:.3f} at the first evaluation, "
              f"{out['f1_final']:.3f} after {out['steps']:,} steps ({out['minutes']:.0f} min)")  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
