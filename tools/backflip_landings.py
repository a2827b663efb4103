"""Count the backflips a Hopper backflip run landed while it trained, by the rule of
`examples/backflip.py`, from the replay buffer of one of its checkpoints: whether its own
experience ever held a landing for its reward to learn from.

    python tools/backflip_landings.py runs/bench-backflip-one-turn/pref-spread_s0
    python tools/backflip_landings.py RUN --checkpoint step_000200000 --every 25

The buffer holds the run's steps in order (its episodes never end early: the backflip env goes
on after a fall to its time limit), so each `--episode-steps` steps are one episode. Prints, for
every `--every` episodes, the landings and the rule's score of the episodes (the mean and the best),
then the leaps of the last `--every` episodes (stretches with the whole body in the air, taken
off from its feet without the torso or thigh coming down since): how many turned half a turn
or more, how many of those came down foot first, and how near standing they came down (the
mean of `backflip.stance`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from prefrl.rundir.checkpoints import latest_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))  # (not a package)
import backflip


def load_buffer(run_dir: Path, checkpoint: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The observations and next observations of a run's replay buffer."""
    where = run_dir / "checkpoints" / checkpoint if checkpoint else latest_checkpoint(run_dir)
    if where is None or not (where / "buffer.npz").exists():
        raise SystemExit(f"{run_dir}: no checkpoint with a replay buffer (buffer.npz) found")
    buffer = np.load(where / "buffer.npz")
    return buffer["obs"], buffer["next_obs"]


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
        "--episode-steps", type=int, default=backflip.EPISODE_STEPS,
        help="the run's episode length: the env's time limit (%(default)s; for runs of "
        "the rules 'best-leap-once' and 'stance', 190)",
    )  # fmt: skip
    args = parser.parse_args()
    n = args.episode_steps
    obs, next_obs = load_buffer(args.run, args.checkpoint)
    reports = [  # (each episode's steps, and the observation its last step led to)
        episode_report(
            np.concatenate([obs[start : start + n], next_obs[start + n - 1 : start + n]])
        )
        for start in range(0, len(obs) - n + 1, n)
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
