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
    given)."""
    seed: int = 0
    render_size: int = 256


def cmd_eval(args: list[str]) -> int:
    from prefrl.loops.compare import compare_policies

    opts = tyro.cli(EvalArgs, args=args, prog="prefrl eval")
    done = compare_policies(
        list(opts.targets), opts.episodes, opts.seed, opts.video, opts.render_size
    )
    title = f"Evaluation on {done.env_id}, {opts.episodes} episodes, seed {opts.seed}"
    print_eval(done.results, done.names, title)
    if done.video is not None:
        order = f" (left to right: {', '.join(done.names)})" if len(done.names) > 1 else ""
        print(f"video: {done.video}{order}")
    return 0
