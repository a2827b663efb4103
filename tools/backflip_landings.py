"""Count the backflips a Hopper backflip run landed while it trained, by the rule of
`examples/backflip.py`, from the replay buffer of one of its checkpoints: whether its own
experience ever held a landing for its reward to learn from.

    python tools/backflip_landings.py runs/bench-backflip-one-turn/pref-spread_s0
    python tools/backflip_landings.py RUN --checkpoint step_000200000 --every 25

The buffer holds the run's steps in order (its episodes never end early: the backflip env goes
on after a fall to its 1000-step limit), so each 1000 steps are one episode. Prints, for every
`--every` episodes, the landings and the rule's score of the episodes (the mean and the best),
then the leaps of the last `--every` episodes (stretches with the whole body in the air, taken
off from its feet without the torso or thigh coming down since): how many turned half a turn
or more, and how many of those came down foot first.
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


def episode_tallies(obs: np.ndarray, next_obs: np.ndarray,
                    episode_steps: int = 1000) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The rule's score and the flips landed in each whole episode of a buffer's steps."""
    episodes = len(obs) // episode_steps
    scores, landed = np.zeros(episodes), np.zeros(episodes, int)
    for e in range(episodes):
        end = (e + 1) * episode_steps
        steps = np.concatenate([obs[e * episode_steps : end], next_obs[end - 1 : end]])
        score, flips = backflip.rule_tally(steps)
        scores[e], landed[e] = float(score), int(flips)
    return scores, landed


def leaps(obs: np.ndarray) -> list[tuple[float, bool]]:
    """(backward turns, came down foot first) of each leap that turned at all in one episode's
    observations, as the rule counts leaps (`backflip.RuleState.leap`)."""
    down, air = backflip.floor_contacts(obs)
    feet = backflip.on_feet(obs[:, 0], obs[:, 1], obs[:, 6], air)
    turns, upright = -np.diff(obs[:, 1]) / backflip.TURN, np.cos(obs[:, 1])
    state, found = backflip.RuleState.start(feet[0] & ~down[0]), []
    for t, turn in enumerate(turns):
        leap = float(state.leap)
        _, state, _ = backflip.rule_step(state, turn, air[t], air[t + 1], down[t + 1],
                                         feet[t + 1], upright[t + 1])  # fmt: skip
        if leap != 0.0 and float(state.leap) == 0.0:  # (it ended: on the floor, or came down)
            found.append((leap, not down[t + 1]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a backflip run directory")
    parser.add_argument("--checkpoint", help="a checkpoint's name (default: the latest)")
    parser.add_argument("--every", type=int, default=50, help="episodes a line")
    args = parser.parse_args()
    obs, next_obs = load_buffer(args.run, args.checkpoint)
    scores, landed = episode_tallies(obs, next_obs)
    print(f"{len(scores)} episodes, {int((landed > 0).sum())} with a landed backflip, "
          f"{int(landed.sum())} landed in all")  # fmt: skip
    for start in range(0, len(scores), args.every):
        part = slice(start, start + args.every)
        print(f"episodes {start}-{min(start + args.every, len(scores)) - 1}: landed "
              f"{int(landed[part].sum())}, rule score {scores[part].mean():.2f} an episode "
              f"(best {scores[part].max():.2f})")  # fmt: skip
    last = range(max(len(scores) - args.every, 0), len(scores))
    found = [leap for e in last for leap in leaps(obs[e * 1000 : (e + 1) * 1000])]
    big = [foot for turns, foot in found if turns >= 0.5]
    print(f"last {len(last)} episodes: {len(found)} leaps, {len(big)} of half a turn or more, "
          f"{sum(big)} of those down foot first")  # fmt: skip


if __name__ == "__main__":
    main()
