"""Callbacks: a Python user's functions, called as a run goes (its metric rows, evaluations,
checkpoints, reward fits, labels), each able to stop the run as Ctrl-C does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prefrl.fielddocs import document_fields
from prefrl.training.evaluate import EvalResult

KINDS = ("log", "eval", "checkpoint", "fit", "labels")


@document_fields
@dataclass
class TrainEvent:
    """What a callback (`train(callback=...)`) is called with. A callback that returns False,
    or calls `event.stop()`, stops the run as Ctrl-C does: a checkpoint is written and the
    result says `interrupted=True`.

        def stop_when_solved(event):
            if event.kind == "eval" and event.eval.success_rate >= 0.9:
                event.stop()
    """

    kind: str
    """What happened: "log" (a row of training metrics was written), "eval" (an evaluation),
    "checkpoint" (one was written), "fit" (the reward model was fitted), "labels" (new labels
    came in)."""
    step: int
    """The run's step: env steps (RL, preferences, RFCL), agent steps summed over the envs
    (frames), gradient steps (IQL, CPL)."""
    run_dir: Path
    """The run directory."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The event's figures: the row logged ("train/..."), the evaluation's ("eval/return_mean",
    ...), the fit's ("reward/val_accuracy", ...), the labels' ("labels/new", "labels/total")."""
    eval: EvalResult | None = None
    """The evaluation (kind "eval"): `mean`, `std`, `success_rate`, per-episode `returns`."""
    checkpoint: Path | None = None
    """The checkpoint written (kind "checkpoint")."""
    stop_requested: bool = False
    """Whether a callback asked the run to stop."""

    def stop(self) -> None:
        """Stop the run: a checkpoint, then the end (`interrupted=True`)."""
        self.stop_requested = True


def as_functions(callback) -> list[Callable]:
    """The functions of a `callback=` argument: None, a function, or a list of them."""
    if callback is None:
        return []
    listed = list(callback) if isinstance(callback, list | tuple) else [callback]
    if not all(callable(f) for f in listed):
        raise TypeError(f"callback={callback!r} is not a function or a list of functions (each "
                        "is called with a prefrl.TrainEvent)")  # fmt: skip
    return listed


class Callbacks:
    """A run's callbacks, and the stop request (Ctrl-C's) a stop they ask for sets: the loop
    under way (`stoppable`) attaches it."""

    def __init__(self, callback=None, run_dir: Path | None = None):
        self.functions = as_functions(callback)
        self.run_dir = run_dir
        self.request = None
        """The `StopRequest` of the stage running (`training.loop.stoppable` sets it)."""
        self.stopped = False
        """Whether a callback asked to stop (loops without a stop request read it)."""

    def __call__(self, kind: str, step: int, metrics: dict | None = None, **more) -> bool:
        """Calls each function with the event; returns whether one asked to stop."""
        if not self.functions:
            return False
        event = TrainEvent(kind, int(step), self.run_dir, dict(metrics or {}), **more)
        for function in self.functions:
            if function(event) is False:
                event.stop()
        if event.stop_requested and not self.stopped:
            self.stopped = True
            request = self.request
            if request is None or not request.requested:  # (not Ctrl-C's stop already)
                say = (request.say if request is not None else None) or print
                say(f"a callback stopped the run at its {kind} event of step {step:,}: a "
                    "checkpoint, then the end")  # fmt: skip
            if request is not None:
                request.requested = True
        return event.stop_requested
