"""A rich progress bar for training: steps, steps/s, last evaluation return. Where the output is
not a terminal (a log file, a job scheduler), a bar would show nothing until the end: plain
lines are printed instead, every `PLAIN_EVERY_S` seconds."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

PLAIN_EVERY_S = 30.0


class TrainingProgress:
    def __init__(
        self, total: int, start: int, enabled: bool = True, last_eval: float | None = None,
        eval_label: str = "eval return", eval_digits: int = 1,
    ):  # fmt: skip
        """`eval_label`, `eval_digits`: what the evaluations' mean is called and how it is shown
        (RFCL's is a success rate: "eval success", 2)."""
        self.enabled = enabled
        self._label, self._digits = eval_label, eval_digits
        self.total = total
        self.plain = enabled and not Console().is_terminal
        self._progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} steps/s"),
            TextColumn(eval_label + " {task.fields[eval]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            disable=not enabled or self.plain,
        )
        self._task = self._progress.add_task(
            "train", total=total, completed=start, rate="-", eval=self._fmt(last_eval), info=""
        )
        self._last_line = (time.monotonic(), start)
        self._eval, self._info = last_eval, ""
        self._final_step: int | None = None

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._final_step is not None:  # (its evaluation never came: say where it ended)
            self._plain_line(self._final_step, None, None, final=True)
        return self._progress.__exit__(*exc)

    def say(self, message: str) -> None:
        """Print a line above the bar (or plainly when the bar is off)."""
        self._progress.console.print(message)

    def update(self, step: int, last_eval: float | None = None, info: str | None = None) -> None:
        if not self.enabled:
            return
        if self.plain:
            self._plain_line(step, last_eval, info)
            return
        fields = {}
        task = self._progress.tasks[0]
        if task.speed:
            fields["rate"] = f"{task.speed:,.0f}"
        if last_eval is not None:
            fields["eval"] = self._fmt(last_eval)
        if info is not None:
            fields["info"] = info
        self._progress.update(self._task, completed=step, **fields)

    def _plain_line(self, step: int, last_eval: float | None, info: str | None,
                    final: bool = False) -> None:  # fmt: skip
        self._eval = last_eval if last_eval is not None else self._eval
        self._info = info if info is not None else self._info
        now, (then, then_step) = time.monotonic(), self._last_line
        if now - then < PLAIN_EVERY_S and step < self.total:
            return
        if step >= self.total and last_eval is None and not final:
            self._final_step = step  # the last line waits for the final evaluation
            return
        self._final_step = None
        rate = (step - then_step) / max(now - then, 1e-9)
        info = f", {self._info}" if self._info else ""
        print(f"step {step:,}/{self.total:,} ({100 * step / self.total:.0f}%), {rate:,.0f} "
              f"steps/s, {self._label} {self._fmt(self._eval)}{info}", flush=True)  # fmt: skip
        self._last_line = (now, step)

    def _fmt(self, value: float | None) -> str:
        return "(none yet)" if value is None else f"{value:,.{self._digits}f}"
