"""`prefrl eval`: trained policies on the same seeds, a table and a video."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from prefrl.cli.common import print_eval


@dataclass(frozen=True)
class EvalArgs:
    """Evaluate trained policies (deterministic actions) on the same seeds and write a video of
    one episode; with several policies, a table of all and their videos side by side."""

    targets: Annotated[tuple[Path, ...], tyro.conf.Positional]
    """Run directories (their latest checkpoint) or checkpoint directories, of one env (e.g. the
    original policy and its CPL fine-tuning)."""
    episodes: int = 10
    video: Path | None = None
    """Write the first episode to this mp4 file (several policies: side by side, in the order
    given). A run on frames (movingdot, atari:*): one episode in colour with the learned reward
    drawn under it (default: viewer.mp4 in the run)."""
    seed: int = 0
    render_size: int = 256


def cmd_eval(args: list[str]) -> int:
    from prefrl.rl.compare import compare_policies

    opts = tyro.cli(EvalArgs, args=args, prog="prefrl eval")
    if len(opts.targets) == 1 and _pixel_run(opts.targets[0]):
        return _view_frames(opts)
    done = compare_policies(
        list(opts.targets), opts.episodes, opts.seed, opts.video, opts.render_size
    )
    title = f"Evaluation on {done.env_id}, {opts.episodes} episodes, seed {opts.seed}"
    print_eval(done.results, done.names, title)
    if done.video is not None:
        order = f" (left to right: {', '.join(done.names)})" if len(done.names) > 1 else ""
        print(f"video: {done.video}{order}")
    return 0


def _pixel_run(target: Path) -> bool:
    import json

    from prefrl.envs import is_pixel_env

    for config in (target / "config.json", target.parent.parent / "config.json"):
        if config.is_file():
            return is_pixel_env(json.loads(config.read_text()).get("env", ""))
    return False


def _view_frames(opts: EvalArgs) -> int:
    """A pixel run: one episode as a video in colour, with the learned reward drawn under it
    when the run learned one (the seed's checkpoint viewer)."""
    from prefrl.pixels.viewer import view_frames_checkpoint

    video = opts.video or opts.targets[0] / "viewer.mp4"
    seen = view_frames_checkpoint(opts.targets[0], video, opts.seed, size=opts.render_size)
    learned = "" if seen.learned_return is None else f", learned {seen.learned_return:.2f}"
    print(f"one episode of {seen.steps} agent steps: return {seen.true_return:.1f}{learned}")
    print(f"video: {seen.video}")
    return 0
