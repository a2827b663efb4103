"""Count the backflips a Hopper backflip run landed while it trained, by the rule of
`examples/backflip.py`, from the replay buffer of one of its checkpoints: whether its own
experience ever held a landing for its reward to learn from.

    python tools/backflip_landings.py runs/bench-backflip-one-turn/pref-spread_s0
    python tools/backflip_landings.py RUN --checkpoint step_000200000 --every 25

The buffer holds the run's steps in order; the run's metrics (`train/episode_length`) say where
each episode ended (practice episodes of the rule 'practice' end after one clip), and without
them each `--episode-steps` steps are one episode (the backflip env goes on after a fall to its
time limit). Prints, for
every `--every` episodes, the landings and the rule's score of the episodes (the mean and the best),
then the leaps of the last `--every` episodes (stretches with the whole body in the air, taken
off from its feet without the torso or thigh coming down since): how many turned half a turn
or more, how many of those came down foot first, and how near standing they came down (the
mean of `backflip.stance`).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))  # (not a package)
import backflip


def load_buffer(run_dir: Path, checkpoint: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The observations and next observations of a run's replay buffer."""
    where = run_dir / "checkpoints" / checkpoint if checkpoint else latest_checkpoint(run_dir)
    if where is None or not (where / "buffer.npz").exists():
        raise SystemExit(f"{run_dir}: no checkpoint with a replay buffer (buffer.npz) found")
    buffer = np.load(where / "buffer.npz")
    return buffer["obs"], buffer["next_obs"]


def episode_bounds(run_dir: Path, steps: int, episode_steps: int | None) -> list[int]:
    """Where the buffer's episodes start, and its end: from the run's metrics (each episode's
    end, logged at the step it ended), or every `episode_steps` steps when given or when the
    metrics do not cover the buffer."""
    if episode_steps is None:
        ends = sorted({int(r["step"]) for r in read_metrics(run_dir)
                       if "train/episode_length" in r and r["step"] <= steps})  # fmt: skip
        if ends and ends[-1] > steps - backflip.EPISODE_STEPS:
            return [0, *ends]
        episode_steps = backflip.EPISODE_STEPS
    return list(range(0, steps + 1, episode_steps))


def episode_report(obs: np.ndarray) -> tuple[float, int, list[tuple[float, bool, float]]]:
    """One episode's rule score, flips landed, and leaps that turned at all, as the rule counts
    them (`backflip.RuleState.leap`): (backward turns, came down foot first, `backflip.stance`
    as it came down)."""
    score, landed, leaps = 0.0, 0, []
    for t, (credit, before, after, flips, down) in enumerate(backflip.rule_trace(obs)):
        score, landed = score + float(credit), landed + int(flips)
        if before.leap != 0.0 and after.leap == 0.0:  # (it ended: on the floor, or came down)
            pose = backflip.stance(obs[t + 1, 0], obs[t + 1, 1])
            leaps.append((float(before.leap), not down, float(pose)))
    return score, landed, leaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a backflip run directory")
    parser.add_argument("--checkpoint", help="a checkpoint's name (default: the latest)")
    parser.add_argument("--every", type=int, default=50, help="episodes a line")
    parser.add_argument(
        "--episode-steps", type=int,
        help="cut the buffer into episodes of this many steps (default: where the run's "
        f"metrics say its episodes ended; without them {backflip.EPISODE_STEPS})",
    )  # fmt: skip
    args = parser.parse_args()
    if args.episode_steps is not None and args.episode_steps < 1:
        parser.error(f"--episode-steps {args.episode_steps}: must be at least 1")
    obs, next_obs = load_buffer(args.run, args.checkpoint)
    bounds = episode_bounds(args.run, len(obs), args.episode_steps)
    reports = [  # (each episode's steps, and the observation its last step led to)
        episode_report(np.concatenate([obs[start:end], next_obs[end - 1 : end]]))
        for start, end in itertools.pairwise(bounds)
    ]
    scores = np.array([r[0] for r in reports])
    landed = np.array([r[1] for r in reports])
    print(f"{len(scores)} episodes, {int((landed > 0).sum())} with a landed backflip, "
          f"{int(landed.sum())} landed in all")  # fmt: skip
    for start in range(0, len(scores), args.every):
        part = slice(start, start + args.every)
        print(f"episodes {start}-{min(start + args.every, len(scores)) - 1}: landed "
              f"{int(landed[part].sum())}, rule score {scores[part].mean():.2f} an episode "
              f"(best {scores[part].max():.2f})")  # fmt: skip
    last = reports[-args.every :]
    found = [leap for r in last for leap in r[2]]
    big = [(foot, pose) for turns, foot, pose in found if turns >= 0.5]
    stances = f"; they came down at a stance of {np.mean([p for _, p in big]):.2f}" if big else ""
    feet = sum(foot for foot, _ in big)
    print(f"last {len(last)} episodes: {len(found)} leaps, {len(big)} of half a turn or more, "
          f"{feet} of those down foot first{stances} (standing: 1)")  # fmt: skip


if __name__ == "__main__":
    main()
