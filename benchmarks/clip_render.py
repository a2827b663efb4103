"""Clip rendering end to end: restore a segment's simulator states, render each frame offscreen,
encode H.264 mp4 — at prefrl's fast quality and at MuJoCo's default quality, same run.

    python benchmarks/clip_render.py --env Hopper-v5 --frames 50 --size 256 --repeats 10

The states come from a random-action rollout. Each quality gets its own renderer (its own GL
context); one untimed clip first (context creation, encoder start-up), then `--repeats` clips
timed one by one; frames/s is over the median clip. Every written clip is checked: the number of
frames, H.264, yuv420p. Target (issue 4): >= 100 frames/s at 256x256 on this 2-core CPU.
"""

from __future__ import annotations

import argparse
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
from prefrl.feedback.clips import ClipRenderer

RESULTS = Path(__file__).parent / "results" / "clip_render.json"


def rollout_states(env_id: str, frames: int, seed: int = 0) -> np.ndarray:
    env = make_env(env_id, seed=seed)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    states = []
    while len(states) < frames:
        states.append(env.get_state())
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_dim))
        if terminated or truncated:
            env.reset()
    env.close()
    return np.stack(states)


def check_clip(path: Path, frames: int, size: int) -> None:
    with av.open(str(path)) as f:
        stream = f.streams.video[0]
        n = sum(1 for _ in f.decode(stream))
        codec, fmt = stream.codec_context.name, stream.codec_context.pix_fmt
        shape = (stream.codec_context.height, stream.codec_context.width)
    if (n, codec, fmt, shape) != (frames, "h264", "yuv420p", (size, size)):
        raise SystemExit(f"bad clip {path}: {n} frames, {codec}, {fmt}, {shape}")


def clip_rate(env_id: str, states: np.ndarray, size: int, fast: bool, repeats: int) -> dict:
    renderer = ClipRenderer(env_id, size, fast=fast)
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats + 1):
            path = Path(tmp) / f"clip{i}.mp4"
            t0 = time.perf_counter()
            renderer.write(path, states)
            if i:  # the first clip pays for the GL context and the encoder's start-up
                seconds.append(time.perf_counter() - t0)
            check_clip(path, len(states), size)
    renderer.close()
    median = float(np.median(seconds))
    return {"frames_per_s": len(states) / median, "clip_seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    states = rollout_states(args.env, args.frames)
    fast = clip_rate(args.env, states, args.size, True, args.repeats)
    default = clip_rate(args.env, states, args.size, False, args.repeats)
    result = {
        "command": "python benchmarks/clip_render.py " + " ".join(sys.argv[1:]),
        "env": args.env,
        "frames": args.frames,
        "size": args.size,
        "mujoco_gl": os.environ["MUJOCO_GL"],
        "frames_per_s": fast["frames_per_s"],
        "default_quality_frames_per_s": default["frames_per_s"],
        "speedup": fast["frames_per_s"] / default["frames_per_s"],
        "clip_seconds": fast["clip_seconds"],
        "default_quality_clip_seconds": default["clip_seconds"],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{args.env} {args.frames} frames {args.size}x{args.size} (render + H.264 encode), "
        f"median clip: fast quality {result['frames_per_s']:.0f} frames/s, MuJoCo default "
        f"quality {result['default_quality_frames_per_s']:.0f} frames/s "
        f"({result['speedup']:.1f}x); target >= 100"
    )


if __name__ == "__main__":
    main()
