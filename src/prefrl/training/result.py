"""What a training run returns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from prefrl.training.evaluate import EvalResult


@dataclass
class RLResult:
    """What `train_rl` (and `RLLearner.train`) returns: the run directory, the last step, the
    final evaluation, its video, and whether the run was stopped early (Ctrl-C)."""

    run_dir: Path
    """The run directory (`load_policy(run_dir)` gives its policy back)."""
    step: int
    """The last env step reached."""
    final_eval: EvalResult | None = dataclasses.field(repr=False)
    """The last evaluation: `returns`, `lengths` and, on tasks with one, `success` per episode
    (None: the run stopped before its agent trained)."""
    video: Path | None
    """The last evaluation's video, where one was recorded."""
    interrupted: bool = False
    """Stopped (Ctrl-C, SIGTERM) before its last step; `--resume` goes on from there."""
