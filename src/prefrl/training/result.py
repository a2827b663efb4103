"""What every training run returns: one `TrainResult` for every workflow."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from prefrl.fielddocs import document_fields
from prefrl.training.best import BestEval, score
from prefrl.training.evaluate import EvalResult

if TYPE_CHECKING:
    from prefrl.training.policies import LoadedPolicy


@document_fields
@dataclass(repr=False)
class TrainResult:
    """What `train()` of every learner returns (RL, preferences, offline, CPL, RFCL, frames):
    where the run is, how far it got, how its policy did, and what it learned from.

        result = RLLearner("Pendulum-v1", steps=20_000).train()
        result.final_eval.mean, result.final_eval.std  # the last evaluation's return
        action = result.policy(observation)            # the trained policy, loaded on demand
        print(result.summary())                        # the line train() ended with
    """

    run_dir: Path
    """The run directory (`result.policy`, `prefrl eval`, `resume=` read it)."""
    steps: int
    """The last step reached: env steps (RL, preferences, RFCL), agent steps summed over the
    envs (frames), gradient steps (IQL, CPL)."""
    final_eval: EvalResult | None = None
    """The last evaluation: `mean`, `std`, `success_rate` and per-episode `returns`,
    `lengths`, `success`. None when this session evaluated nothing (stopped before its first,
    or resumed at its last step)."""
    interrupted: bool = False
    """Stopped before its last step (Ctrl-C, SIGTERM, a callback); resuming goes on from its
    latest checkpoint."""
    labels: int | None = None
    """Labels learned from: pairs labelled (ratings, for CPL fine-tuning). None where the
    workflow takes none (RL, RFCL)."""
    agreement: float | None = None
    """How well the learned reward agrees with the true one, where both are known: the
    correlation of their returns over segments (preferences), clips (frames) or the dataset's
    episodes (offline). None otherwise."""
    video: Path | None = None
    """The last evaluation's video, where one was recorded."""
    best_eval: BestEval | None = None
    """The best evaluation so far (`step`, `success_rate`, `mean`) and where its policy is kept
    (`path`: `RUN/best`); RL, preference and RFCL runs keep one."""
    title: str = ""
    """What was trained, on what: "SAC on Pendulum-v1", "PEBBLE on toy:point-reach", ..."""
    details: dict = field(default_factory=dict)
    """The workflow's own figures: `reward_metrics` (the last reward fit's: held-out accuracy,
    correlations), `unanswered` and `notes` (preferences: pairs never answered, what the run
    said of its labels), `stage`, `demos_solved`, `success_once` (RFCL), `start_eval` (CPL:
    the starting policy's evaluation), `pairs` and `metrics` (CPL), `labels_are` ("ratings":
    CPL fine-tuning's, of single clips, paired), `score_mean`/`score_std` (offline: the
    D4RL-normalised score)."""

    @functools.cached_property
    def policy(self) -> LoadedPolicy:
        """The trained policy (`load_policy(run_dir)`, loaded at first use): `policy(obs)`
        gives deterministic actions. Runs whose policy does not load (offline IQL, frames)
        raise an error saying why."""
        from prefrl.training.policies import load_policy

        return load_policy(self.run_dir)

    @functools.cached_property
    def best_policy(self) -> LoadedPolicy:
        """The best-evaluated policy (`load_policy(run_dir / "best")`), where the run kept one;
        its evaluation is `best_eval`."""
        from prefrl.training.policies import load_policy

        if self.best_eval is None:
            raise ValueError(f"{self.run_dir} keeps no best policy: RL, preference and RFCL "
                             "runs keep one at their evaluations")  # fmt: skip
        return load_policy(self.best_eval.path)

    def summary(self) -> str:
        """One line: what was trained, how far, how it did; what `train()` prints last."""
        head = self.title or "the run"
        if self.interrupted:
            head = f"{head}: stopped at step {self.steps:,}"
            if self.final_eval is None:
                return f"{head}; {self.run_dir}"
        elif self.final_eval is None:
            if stop_after := self.details.get("stop_after"):
                return (f"{head}: stopped as stop_after={stop_after!r} asks, before the agent's "
                        f"first step; {self.run_dir}")  # fmt: skip
            return f"{head} at step {self.steps:,}: nothing left to train; {self.run_dir}"
        else:
            head = f"{head} after {self.steps:,} steps"
        start = self.details.get("start_eval")
        parts = [self.final_eval.describe(start if isinstance(start, EvalResult) else None)]
        if self.labels is not None and self.details.get("labels_are") == "ratings":
            parts.append(f"{self.labels:,} ratings ({self.details['pairs']:,} pairs)")
        elif self.labels is not None:
            parts.append(f"{self.labels:,} labels")
        if self.agreement is not None:
            parts.append(f"learned vs true reward {self.agreement:.2f}")
        best = self.best_eval
        final = self.final_eval
        if best is not None and best.score > score(final.success_rate, final.mean):
            parts.append(f"best {best.describe()} (its policy: {best.path})")
        last = ", its last evaluation" if self.interrupted else ""
        return f"{head}{last}: {', '.join(parts)}; {self.run_dir}"

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        shown = {"run_dir": str(self.run_dir), "steps": self.steps, "final_eval": self.final_eval,
                 "interrupted": self.interrupted, "labels": self.labels,
                 "agreement": self.agreement, "video": self.video and str(self.video),
                 "title": self.title, "details": self.details}  # fmt: skip
        return f"TrainResult({', '.join(f'{k}={_short(v)}' for k, v in shown.items())})"


def _short(value, depth: int = 0) -> str:
    """A value as a repr shows it: arrays, long lists and big dicts as their size."""
    if isinstance(value, np.ndarray):
        return f"array({value.shape[0] if value.ndim == 1 else value.shape} values)"
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}"
    if isinstance(value, list | tuple) and len(value) > 4:
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        if depth or len(value) > 8:
            return f"{{{len(value)} entries}}"
        return "{" + ", ".join(f"{k!r}: {_short(v, depth + 1)}" for k, v in value.items()) + "}"
    return repr(value)


def finished(result: TrainResult) -> TrainResult:
    """Say the result's one line (as the command does at the end of a run) and return it."""
    print(result.summary(), flush=True)
    return result
