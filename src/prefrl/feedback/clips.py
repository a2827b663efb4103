"""Clips of segments for people to compare: re-created from stored simulator states, rendered
offscreen at a fast quality setting, encoded as H.264 mp4 that browsers play.

`render_pending` is one pass of the renderer worker (`prefrl.feedback.renderer`): it keeps the newest open queries' clips ready and
drops older unrendered queries when people label slower than the agent asks (while a trainer
runs), so the trainer is never slowed down by rendering or by people.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prefrl.data.segments import Segments
from prefrl.envs import RenderSettings, is_pixel_env, make_env, make_pixel_env
from prefrl.render.video import block_scale, enlarge, read_video, write_video
from prefrl.rundir.workers import trainer_running

CLIP_DIR = "clips"


class ClipRenderer:
    """Renders segments of one environment from their per-step simulator states."""

    def __init__(self, env_id: str, size: int = 256, fast: bool = True):
        self.settings = RenderSettings(width=size, height=size, fast=fast)
        self.env = make_env(env_id, seed=0, render=self.settings)

    @property
    def fps(self) -> float:
        return self.env.fps

    def frames(self, states: np.ndarray) -> list[np.ndarray]:
        out = []
        for state in states:
            self.env.set_state(state)
            out.append(self.env.render())
        return out

    def write(self, path: Path, states: np.ndarray) -> int:
        """The clip of `states`, with its sound where the env makes one (`clip_audio`: the
        piano's keys)."""
        frames = self.frames(states)
        sound = getattr(self.env.unwrapped, "clip_audio", None)
        write_video(path, frames, fps=self.fps, audio=sound(states) if sound else None)
        return len(frames)

    def write_segment(self, path: Path, segment: Segments) -> int:
        """The clip of a stored segment (one row): from its per-step states."""
        return self.write(path, segment.state[0])

    def close(self) -> None:
        self.env.close()


class FrameClipRenderer:
    """Renders clips of pixel envs (Atari, MovingDot) as people judge them: replayed from the
    env state before the clip's first step by its actions, every emulator frame in full colour
    at the game's frame rate (4 per agent step), each pixel enlarged to a block by the smallest
    whole factor that makes the clip at least `size` pixels high (Atari's 210x160 screen: 2x,
    420x320, at 256); not the 84x84 grey input."""

    def __init__(self, env_id: str, size: int = 256):
        self.env = make_pixel_env(env_id, seed=0)
        self.env.reset()
        height, width, _ = self.env.render().shape
        self.scale = block_scale(height, size)
        self.settings = RenderSettings(width=width * self.scale, height=height * self.scale)

    @property
    def fps(self) -> float:
        return self.env.game.fps

    def frames(self, segment: Segments) -> list[np.ndarray]:
        self.env.set_state(segment.state[0, 0])
        out: list[np.ndarray] = []
        for action in segment.action[0, :, 0]:
            _, _, terminated, _ = self.env.step(int(action), colour=out)
            if terminated:
                break
        return [enlarge(f, self.scale) for f in out]

    def write_segment(self, path: Path, segment: Segments) -> int:
        frames = self.frames(segment)
        write_video(path, frames, fps=self.fps)
        return len(frames)

    def close(self) -> None:
        self.env.close()


def make_clip_renderer(env_id: str, size: int = 256) -> ClipRenderer | FrameClipRenderer:
    """The renderer for an env's clips: from per-step simulator states, or for pixel envs by
    replaying the game."""
    return FrameClipRenderer(env_id, size) if is_pixel_env(env_id) else ClipRenderer(env_id, size)


def side_by_side(left: list[np.ndarray], right: list[np.ndarray], gap: int = 8) -> list:
    """One frame sequence with both clips next to each other (a white bar between them)."""
    n = max(len(left), len(right))
    left = left + [left[-1]] * (n - len(left))
    right = right + [right[-1]] * (n - len(right))
    h = max(left[0].shape[0], right[0].shape[0])
    bar = np.full((h, gap, 3), 255, np.uint8)

    def pad(f):
        return np.pad(f, ((0, h - f.shape[0]), (0, 0), (0, 0)), constant_values=255)

    return [np.concatenate([pad(a), bar, pad(b)], axis=1) for a, b in zip(left, right)]


def pair_clip(query_id: int) -> str:
    """Where the side-by-side video of a query goes, relative to the run directory."""
    return f"{CLIP_DIR}/pair{query_id:09d}.mp4"


def render_pending(
    store,
    run_id: int,
    run_dir: Path,
    renderer: ClipRenderer | FrameClipRenderer,
    queue: int,
    pairs: bool = False,
) -> dict:
    """One pass: render the clips of the newest `queue` open queries that lack them, and, while
    a trainer runs (asking for more), drop the older unrendered open queries (stale candidates):
    a finished or stopped run asks for nothing new, so every pair it asked stays to be answered.
    With `pairs`, also write each of those queries as one side-by-side video (`pair_clip`).
    Returns counts."""
    run_dir = Path(run_dir)
    todo = store.segments_to_render(run_id, limit=queue)
    rendered = 0
    for seg_id in todo:
        rel = f"{CLIP_DIR}/seg{seg_id:09d}.mp4"
        frames = renderer.write_segment(run_dir / rel, store.segments(run_dir, [seg_id]))
        store.add_clip(seg_id, rel, renderer.settings.width, renderer.settings.height, frames,
                       renderer.fps)  # fmt: skip
        rendered += 1
    asking = trainer_running(run_dir) is not False
    dropped = store.drop_stale_queries(run_id, keep=queue) if asking else 0
    side = 0
    if pairs:
        for q in store.open_queries(run_id)[-queue:]:
            if not (run_dir / pair_clip(q.id)).exists():
                write_pair_clip(store, run_dir, q, renderer.fps)
                side += 1
    return {"rendered": rendered, "dropped": dropped, "pairs": side}


def write_pair_clip(store, run_dir: Path, query, fps: float | None = None) -> Path:
    """Write query `query`'s side-by-side video (`pair_clip`) from its two rendered clips:
    decoding them is far cheaper than rendering again. `fps` None: the clips' own."""
    clips = store.clip_infos([query.left_segment, query.right_segment])
    (left_path, seconds), (right_path, _) = clips[query.left_segment], clips[query.right_segment]
    left, right = read_video(run_dir / left_path), read_video(run_dir / right_path)
    if fps is None:
        fps = len(left) / seconds if seconds else 30.0
    return write_video(run_dir / pair_clip(query.id), side_by_side(left, right), fps=fps)
