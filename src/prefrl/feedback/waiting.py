"""What a person labelling is told when there is no pair to show them, and why: the web page and
the terminal labeller say the same thing, never "the agent is making them" while nothing is."""

from __future__ import annotations

import json
from pathlib import Path

from prefrl.feedback.store import FeedbackStore
from prefrl.rundir.checkpoints import latest_checkpoint
from prefrl.rundir.metrics import read_metrics
from prefrl.rundir.workers import failures, renderer_running, trainer_running


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def run_kind(run_dir: Path) -> dict:
    """The run's config.json (empty where unreadable): says whether a trainer asks for pairs."""
    try:
        return json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def no_pair_message(
    store: FeedbackStore, run_id: int, run_dir: Path, annotator_id: int | None = None
) -> str:
    """Why no pair can be handed to this annotator right now, and what happens next."""
    broken = failures(run_dir)
    if broken:
        return " ".join(f"{s.describe()[0].upper()}{s.describe()[1:]}." for s in broken)
    open_ = store.open_query_summary(run_id, annotator_id)
    if open_.without_clips:
        return f"{open_.without_clips} pair(s) are being rendered; they appear here when ready."
    config = run_kind(run_dir)
    trained = "steps" in config  # (else a labelling run of a fixed set of pairs: none comes)
    gone = no_trainer_message(store, run_id, run_dir, config) if trained else None
    if open_.held_by_others:
        who = ", ".join(open_.holders) or "other annotators"
        when = (
            f" they come back in {_minutes(open_.free_in_seconds)} unless answered"
            if open_.free_in_seconds is not None
            else ""
        )
        more = " New pairs appear here as the agent asks for them." if trained else ""
        return (f"The {open_.held_by_others} open pair(s) are being labelled by {who};{when}."
                f"{' ' + gone if gone else more}")  # fmt: skip
    if not trained:
        step = config.get("next")
        return "Every pair is answered: thank you." + (f" Next: {step}" if step else "")
    if gone:
        return gone
    if spent := _budget_spent(store, run_id, config):
        budget, flag = spent
        return (f"Every pair is answered, and the run has asked all {budget} of its budget "
                f"({flag}): it trains on them to its end, asking no more.")  # fmt: skip
    return "Every pair asked so far is answered: the agent asks for more as it trains."


def _budget_spent(store: FeedbackStore, run_id: int, config: dict) -> tuple[int, str] | None:
    """A training run that has asked all the labels it asks for in all: that budget and the
    flag that sets it (None while it has more to ask)."""
    if "ppo_frames" in config:  # (prefrl frames)
        budget, flag = config.get("labels"), "--labels"
    else:
        budget, flag = (config.get("schedule") or {}).get("budget"), "--schedule.budget"
    return (budget, flag) if budget is not None and store.query_count(run_id) >= budget else None


def no_trainer_message(
    store: FeedbackStore, run_id: int, run_dir: Path, config: dict
) -> str | None:
    """Where no trainer runs on a training run: that it finished or stopped, with how many
    labels, and what to run next (None while one runs)."""
    ended = _ended(run_dir, config)
    if ended is None:
        return None
    step, steps, command = ended
    labels = sum(store.label_counts(run_id).values())
    if step >= steps:
        return (f"The run has finished ({steps:,} steps) with {labels} label(s). Next: see what "
                f"it learned with `prefrl eval {run_dir}`, or train it further (and be asked for "
                f"more): `prefrl {command} --resume {run_dir} --steps {2 * steps}`.")  # fmt: skip
    more = ("train on them to its end (it has asked all its budget)"
            if _budget_spent(store, run_id, config) else "be asked for more")  # fmt: skip
    return (f"The trainer is not running: it stopped at step {step:,} of {steps:,} with {labels} "
            f"label(s). Resume it to {more}: `prefrl {command} --resume {run_dir}`.")  # fmt: skip


def _ended(run_dir: Path, config: dict) -> tuple[int, int, str] | None:
    """Where no trainer runs on a training run: the step it reached, its steps and the command
    that made it (None while one runs)."""
    if trainer_running(run_dir) is not False:
        return None
    command = "frames" if "ppo_frames" in config else "train"
    return _stopped_at(run_dir), config["steps"], command


def _stopped_at(run_dir: Path) -> int:
    """Where a resume goes on from: its latest checkpoint's step (a stop writes one where it
    stopped), else its last metrics row's."""
    ckpt = latest_checkpoint(run_dir)
    try:
        return int(json.loads((ckpt / "loop.json").read_text())["step"])
    except (TypeError, OSError, ValueError, KeyError):
        rows = read_metrics(run_dir)
        return rows[-1]["step"] if rows else 0


def resume_notice(run_dir: Path) -> str | None:
    """Said above a pair of a training run that no trainer runs on: its labels are still
    taken, and trained on once it is resumed (None while a trainer runs, and for a labelling
    run, which has none)."""
    config = run_kind(run_dir)
    ended = _ended(run_dir, config) if "steps" in config else None
    if ended is None:
        return None
    step, steps, command = ended
    if step >= steps:
        further = f"prefrl {command} --resume {run_dir} --steps {2 * steps}"
        return (f"The run has finished ({steps:,} steps): labels given now are trained on when "
                f"it is trained further: `{further}`.")  # fmt: skip
    return (f"The trainer is not running (it stopped at step {step:,} of {steps:,}): labels "
            f"given now are trained on when it is resumed: `prefrl {command} --resume "
            f"{run_dir}`.")  # fmt: skip


def first_labels_status(
    store: FeedbackStore, run_id: int, run_dir: Path, to_go: int, serving: bool = False
) -> str:
    """What a trainer waiting for its first `to_go` labels waits for, for its console.
    `serving`: the trainer started a labelling server, whose renderer makes the clips."""
    broken = failures(run_dir)
    if broken:
        return "; ".join(s.describe() for s in broken)
    open_ = store.open_query_summary(run_id)
    parts = [f"{to_go} label(s) to go"]
    if open_.without_clips and (serving or renderer_running(run_dir) is not False):
        parts.append(f"{open_.without_clips} pair(s) still being rendered")
    elif open_.without_clips:
        parts.append(f"their clips are made once you label: start `prefrl label {run_dir}` (or "
                     f"`prefrl serve {run_dir}` for the browser) in another terminal")  # fmt: skip
    if open_.held_by_others:
        when = (
            f", back to the others in {_minutes(open_.free_in_seconds)} unless answered"
            if open_.free_in_seconds is not None
            else ""
        )
        parts.append(f"{open_.held_by_others} on {', '.join(open_.holders)}'s screen{when}")
    return "; ".join(parts)
