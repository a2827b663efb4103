"""What a person labelling is told when there is no pair to show them, and why: the web page and
the terminal labeller say the same thing, never "the agent is making them" while nothing is."""

from __future__ import annotations

import json
from pathlib import Path

from prefrl.feedback.store import FeedbackStore
from prefrl.rundir.workers import failures


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
    if open_.held_by_others:
        who = ", ".join(open_.holders) or "other annotators"
        when = (
            f" they come back in {_minutes(open_.free_in_seconds)} unless answered"
            if open_.free_in_seconds is not None
            else ""
        )
        return (
            f"The {open_.held_by_others} open pair(s) are being labelled by {who};{when}. "
            "New pairs appear here as the agent asks for them."
        )
    config = run_kind(run_dir)
    if "steps" not in config:  # a labelling run of a fixed set of pairs: no trainer asks more
        step = config.get("next")
        return "Every pair is answered: thank you." + (f" Next: {step}" if step else "")
    return "Every pair asked so far is answered: the agent asks for more as it trains."


def first_labels_status(store: FeedbackStore, run_id: int, run_dir: Path) -> str:
    """What a trainer waiting for its first labels waits for, for its console."""
    broken = failures(run_dir)
    if broken:
        return "; ".join(s.describe() for s in broken)
    open_ = store.open_query_summary(run_id)
    parts = [f"{open_.total} label(s) to go"]
    if open_.without_clips:
        parts.append(f"{open_.without_clips} pair(s) still being rendered")
    if open_.held_by_others:
        when = (
            f", back to the others in {_minutes(open_.free_in_seconds)} unless answered"
            if open_.free_in_seconds is not None
            else ""
        )
        parts.append(f"{open_.held_by_others} on {', '.join(open_.holders)}'s screen{when}")
    return "; ".join(parts)
