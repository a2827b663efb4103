"""Label schedules: how many labels the loop should have asked for by env step t.

- sessions (PEBBLE): `session_size` queries every `interval` steps from the first query step;
- annealed (rl-teacher): N · [f + (1 - f)(1 - 0.01^(t/T))], the last term divided by 0.99 so
  that the whole budget is asked for by the last step (as published it stops at f + 0.99(1 - f));
- decay (Christiano et al. 2017): an initial batch, then a rate ∝ c / (t + c), c = 2·10⁶
  (MuJoCo), whose integral reaches the budget at the last step.
Every schedule is capped by the total `budget`; the initial labels come from the segments of the
random (or pre-trained) policy, asked for at the first query step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prefrl.fielddocs import document_fields
from prefrl.rundir.config import check_fields, check_own_types

SCHEDULES = ("sessions", "annealed", "decay")


@document_fields
@dataclass(frozen=True)
class ScheduleConfig:
    """When labels are asked for: the schedule's kind, the label budget and its pace."""

    kind: str = "sessions"
    """sessions (PEBBLE), annealed (rl-teacher) or decay (Christiano)."""
    budget: int = 1000
    """Total labels asked for over the run."""
    initial: int | None = None
    """Labels asked for at the first query step, from the initial policy's segments (default:
    one session for sessions, a quarter of the budget otherwise)."""
    session_size: int = 50
    """Queries per session (sessions schedule)."""
    interval: int = 20_000
    """Env steps between sessions; the other schedules top up to their count this often (each
    top-up is one batch of queries and one reward-model fit)."""
    decay_constant: float = 2e6
    """c in the decaying rate c / (t + c) (Christiano: 2e6 on MuJoCo, 5e6 on Atari)."""

    def __post_init__(self) -> None:
        check_own_types(self)
        if self.kind not in SCHEDULES:
            raise ValueError(
                f"label schedule {self.kind!r} is unknown; known: {', '.join(SCHEDULES)}"
            )
        check_fields(self, {
            **{name: (getattr(self, name) >= 1, ">= 1")
               for name in ("budget", "session_size", "interval")},
            "initial": (self.initial is None or self.initial >= 0, ">= 0"),
            "decay_constant": (self.decay_constant > 0, "> 0"),
        }, "schedule ")  # fmt: skip
        if self.initial_labels > self.budget:
            raise ValueError(
                f"the label budget ({self.budget}) is smaller than the initial share "
                f"({self.initial_labels}); raise --schedule.budget or lower --schedule.initial"
            )

    @property
    def initial_labels(self) -> int:
        if self.initial is not None:
            return self.initial
        if self.kind == "sessions":
            return min(self.session_size, self.budget)
        return self.budget // 4

    def wanted(self, step: int, first_step: int, total_steps: int) -> int:
        """Labels that should have been asked for by `step` (queries start at `first_step`)."""
        if step < first_step:
            return 0
        t, horizon = step - first_step, max(1, total_steps - first_step)
        n0, budget = self.initial_labels, self.budget
        if self.kind == "sessions":
            wanted = n0 + self.session_size * (t // self.interval)
        elif self.kind == "annealed":
            f = n0 / budget
            wanted = math.floor(budget * (f + (1 - f) * (1 - 0.01 ** (t / horizon)) / 0.99) + 1e-9)
        else:
            c = self.decay_constant
            wanted = n0 + math.floor((budget - n0) * math.log1p(t / c) / math.log1p(horizon / c))
        return int(min(budget, max(n0, wanted)))
