"""The rating commands of CPL fine-tuning: `collect` (clips to rate) and `rate`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro


@dataclass(frozen=True)
class CollectArgs:
    """Roll out checkpoints of a run at several action-noise levels into a rating run (segments
    with their provenance, and clips) for people or a scripted rater to rate 1-100."""

    checkpoints: tuple[Path, ...]
    """Run directories (their latest checkpoint) or checkpoint directories, of one env."""
    noise: tuple[float, ...] = (0.0, 0.1, 0.3)
    """Std of the Gaussian noise added to the policy's deterministic action (before its tanh,
    so actions stay inside (-1, 1))."""
    segments: int = 150
    """Segments in all, an equal share per (checkpoint, noise). With --siblings, whole
    families: rounded up to a multiple of siblings x checkpoints x noise levels."""
    length: int = 50
    siblings: int = 1
    """Segments per start state: above 1, each family of segments starts from one state the
    noisy policy reached and differs by its action noise alone (rate them, then fine-tune with
    `prefrl finetune --pairs siblings`). Needs every --noise above 0."""
    out: Path = Path("runs/ratings")
    clip_size: int = 256
    """Clip size in pixels; 0 renders no clips (scripted raters need none)."""
    seed: int = 0


def cmd_collect(args: list[str]) -> int:
    from prefrl.finetuning.rating_runs import collect_rating_run

    opts = tyro.cli(CollectArgs, args=args, prog="prefrl collect")
    out, segments = collect_rating_run(
        opts.checkpoints, opts.out, noise=opts.noise, segments=opts.segments, length=opts.length,
        siblings=opts.siblings, clip_size=opts.clip_size, seed=opts.seed,
    )  # fmt: skip
    family = opts.siblings * len(opts.checkpoints) * len(opts.noise)
    why = (f" (--segments {opts.segments} asked: families are whole, {family} segments each, "
           "less any sibling whose episode ended before --length steps)")  # fmt: skip
    print(
        f"{len(segments)} segments of {opts.length} steps from {len(opts.checkpoints)} "
        f"checkpoint(s) x noise {list(opts.noise)}"
        + (f", in families of {opts.siblings} siblings" if opts.siblings > 1 else "")
        + (why if len(segments) != opts.segments else "")
        + f" in {out}\nrate them: prefrl serve "
        f"{out} (then /rate), or prefrl rate {out} --rater return"
    )
    return 0


@dataclass(frozen=True)
class RateArgs:
    """Rate every segment of a rating run 1-100: yourself in the terminal, or a scripted rater."""

    run_dir: Annotated[Path, tyro.conf.Positional]
    rater: str = "return"
    """terminal (you: one clip at a time, typed 1-100), or a scripted rater: return (true
    return), regret:RUN (advantage of the segment's actions under the critic of a better SAC run
    or checkpoint), low-action / high-action (smaller / larger actions), obs:I (higher
    observation I on average), low-obs:I (lower), piano-f1 / piano-wrong-keys (piano runs:
    higher key-press F1 / fewer keys pressed that the song did not ask for), A+w*B: weighted
    standardised scores, e.g. return+0.5*low-action, or A@B/N: A at equal B, e.g.
    low-action@return/5 (N bands of B's score; a higher band always wins, inside a band A
    decides)."""
    noise: float = 0.0
    """Std of the rating noise, as a share of the 1-100 scale (scripted raters)."""
    seed: int = 0
    annotator: str = "terminal"
    """Who is rating (--rater terminal)."""
    open_clips: bool = True
    """Open each clip with the system viewer where there is a display (--rater terminal)."""


def cmd_rate(args: list[str]) -> int:
    from prefrl.feedback.raters import ratings_held
    from prefrl.feedback.ratings import per_rater

    opts = tyro.cli(RateArgs, args=args, prog="prefrl rate")
    before = ratings_held(opts.run_dir)
    if before:
        print(f"{opts.run_dir} already holds ratings: {per_rater(before)}")
    if opts.rater == "terminal":
        from prefrl.feedback.store import FeedbackStore, run_info
        from prefrl.feedback.terminal import rate_in_terminal

        run = run_info(opts.run_dir)
        try:
            with FeedbackStore(run.store, create=False) as store:
                n = rate_in_terminal(
                    store, run.uid, run.run_dir, opts.annotator, open_clips=opts.open_clips
                )
        except KeyboardInterrupt:
            return 0
        print(f"{n} clips of {opts.run_dir} rated")
    else:
        from prefrl.feedback.raters import rate_scripted

        n = rate_scripted(opts.run_dir, opts.rater, opts.noise, opts.seed)
        print(f"{n} segments of {opts.run_dir} rated by the scripted {opts.rater} rater")
        replaced = {who: k for who, k in before.items() if who.startswith("scripted:")
                    and who != f"scripted:{opts.rater}"}  # fmt: skip
        if replaced:
            print(f"they replace those of {per_rater(replaced)} (a run keeps one scripted "
                  "rater's ratings)")  # fmt: skip
    after = ratings_held(opts.run_dir)
    if len(after) > 1:
        print(
            f"it now holds ratings: {per_rater(after)}; `prefrl finetune` trains on every "
            "rater's (a segment rated by several counts with their mean rating) unless "
            "--raters chooses"
        )
    return 0
