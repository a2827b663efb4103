"""The best-evaluated policy of a run, kept in `RUN/best` beside its checkpoints.

A run's last policy is not always its best: one of RFCL's seeds on MetaWorld's stick-pull
succeeded in 0.9 of its evaluation episodes at 480k steps and in none at 500k, its last, and
checkpoints keep only the newest few. So each evaluation of an RL, preference or RFCL run that
scores at least as well as the best before it writes its policy to `RUN/best` (the success rate
decides where the task reports one, the mean return breaks its ties; the mean return
elsewhere; the newer of equals is kept). It is written as checkpoints are (complete before it is
visible) and loads as a run does: `prefrl eval RUN/best`, `load_policy("RUN/best")`,
`result.best_policy`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from prefrl.rundir.checkpoints import (
    begin_checkpoint,
    commit_checkpoint,
    latest_checkpoint,
    write_json,
)
from prefrl.training.evaluate import EvalResult

BEST = "best"
"""The folder of a run directory that holds its best-evaluated policy."""


@dataclass(frozen=True)
class BestEval:
    """The best evaluation of a run so far, and where its policy is."""

    step: int
    success_rate: float | None
    """The share of episodes ended in success (None: the task reports none)."""
    mean: float
    """The mean return."""
    path: Path
    """The folder that loads as its policy (`RUN/best`)."""

    @property
    def score(self) -> tuple[float, ...]:
        return score(self.success_rate, self.mean)

    def describe(self) -> str:
        if self.success_rate is not None:
            return f"success {self.success_rate:.2f} at step {self.step:,}"
        return f"return {self.mean:.1f} at step {self.step:,}"


def score(success_rate: float | None, mean: float) -> tuple[float, ...]:
    """What evaluations are compared by: (success rate, mean return), or (mean return,)."""
    return (mean,) if success_rate is None else (success_rate, mean)


def read_best(run_dir: Path) -> BestEval | None:
    """The best evaluation a run directory kept, if any."""
    ckpt = latest_checkpoint(Path(run_dir) / BEST)
    if ckpt is None:
        return None
    found = json.loads((ckpt / "best.json").read_text())
    return BestEval(found["step"], found["success_rate"], found["mean"], Path(run_dir) / BEST)


class BestPolicy:
    """Keeps a loop's best-evaluated policy; `loop` gives `run_dir`, `write_policy(folder)`
    (the files `load_policy` reads) and `check_savable(state)`, `state`."""

    def __init__(self, loop):
        self.loop = loop
        self.best = read_best(loop.run_dir)  # (a resumed run goes on from its best)

    def consider(self, step: int, result: EvalResult) -> None:
        """Keep this evaluation's policy if it scores at least as well as the best so far."""
        rate = result.success_rate
        new = BestEval(step, rate, result.mean, self.loop.run_dir / BEST)
        if not all(math.isfinite(x) for x in new.score):
            return
        if self.best is not None and new.score < self.best.score:
            return
        try:
            self.loop.check_savable(self.loop.state)
        except FloatingPointError:
            return  # (the next checkpoint says so)
        tmp = begin_checkpoint(new.path, step)
        self.loop.write_policy(tmp)
        write_json(tmp / "best.json", {"step": step, "success_rate": rate, "mean": new.mean})
        commit_checkpoint(tmp, keep=1)
        self.best = new
