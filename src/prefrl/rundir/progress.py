"""A rich progress bar for training: steps, steps/s, last evaluation return. Where the output is
not a terminal (a log file, a job scheduler), a bar would show nothing until the end: plain
lines are printed instead (and where the bar is turned off, `--no-progress`), every
`PLAIN_EVERY_S` seconds, or at the steps training metrics are logged at (`print_at_logs`), with
the same rate as the metrics' `train/steps_per_s` (and every `PLAIN_EVERY_S` seconds while other
work is shown, a reward fit's steps)."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from prefrl.rundir.status import PhaseFile

PLAIN_EVERY_S = 30.0


def format_rate(rate: float) -> str:
    """A rate as the bar and the plain lines show it: whole numbers, 3 digits below 100."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


class TrainingProgress:
    def __init__(
        self, total: int, start: int, enabled: bool = True, last_eval: float | None = None,
        eval_label: str | None = "eval return", eval_digits: int = 1, unit: str = "steps",
        title: str = "training", phase_of: Path | None = None,
    ):  # fmt: skip
        """`eval_label`, `eval_digits`: what the evaluations' mean is called and how it is shown
        (RFCL's is a success rate: "eval success", 2; None: no evaluations). `unit`: what is
        counted ("agent steps" on frames, "gradient steps"); `title`: of what. `enabled`:
        the bar; without it, plain lines as where the output is not a terminal. `phase_of`: a
        run this is a phase of before its first logged step (a pixel run's reward
        pre-training), whose phase file then says how far it is (`prefrl runs`)."""
        self._phase = PhaseFile(phase_of, title, total, start, unit) if phase_of else None
        self._label, self._digits, self._unit, self._title = eval_label, eval_digits, unit, title
        self.total = total
        self.plain = not enabled or not Console().is_terminal
        evals = [TextColumn(eval_label + " {task.fields[eval]}")] if eval_label else []
        self._progress = Progress(
            TextColumn(f"[bold]{title}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} " + unit + "/s"),
            *evals,
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("eta {task.fields[eta]}"),
            disable=self.plain,
        )
        self._task = self._progress.add_task(
            "train", total=total, completed=start, rate="-", eval=self._fmt(last_eval), info="",
            eta="-",
        )  # fmt: skip
        self._last_line = (time.monotonic(), start)
        self._first = (time.monotonic(), start)  # (the ETA's: all this session's time, fits too)
        self._eval, self._info, self._rate = last_eval, "", None
        self._final_step: int | None = None
        self._at_logs = False

    def __enter__(self):
        self._progress.__enter__()
        if self._phase:
            self._phase.__enter__()
        return self

    def __exit__(self, *exc):
        if self._phase:
            self._phase.__exit__(*exc)
        if self._final_step is not None:  # (its evaluation never came: say where it ended)
            self._plain_line(self._final_step, None, None, final=True)
        return self._progress.__exit__(*exc)

    def say(self, message: str) -> None:
        """Print a line above the bar (or plainly when the bar is off)."""
        self._progress.console.print(message)

    def print_at_logs(self) -> None:
        """Plain lines come at the steps `logged` is called at (and at the end), not on a
        clock."""
        self._at_logs = True

    def logged(self, step: int, rate: float | None) -> None:
        """Training metrics were logged at `step`, their rate `rate` (per second): the bar
        shows it, and a plain line says it."""
        self._rate = rate if rate is not None else self._rate
        if self.plain:
            if step >= self.total and self._last_line[1] == step:
                return  # (the last line is out: the final evaluation's)
            self._plain_line(step, None, None, logged=True)
            return
        self.update(step)

    def update(self, step: int, last_eval: float | None = None, info: str | None = None) -> None:
        if self._phase:
            self._phase.update(step)
        if self.plain:
            self._plain_line(step, last_eval, info)
            return
        fields = {"rate": self._fmt_rate(), "eta": self._eta(step)}
        if last_eval is not None:
            fields["eval"] = self._fmt(last_eval)
        if info is not None:
            fields["info"] = info
        self._progress.update(self._task, completed=step, **fields)

    def _eta(self, step: int) -> str:
        """The time left at the pace of this session so far (whatever it spent the time on:
        evaluations and reward fits too)."""
        then, first = self._first
        if step <= first:
            return "-"
        left = (self.total - step) * (time.monotonic() - then) / (step - first)
        return str(datetime.timedelta(seconds=round(max(left, 0.0))))

    def _fmt_rate(self) -> str:
        if self._rate is not None:
            return format_rate(self._rate)
        task = self._progress.tasks[0]  # (no metrics logged yet: rich's own estimate)
        return format_rate(task.speed) if task.speed else "-"

    def _plain_line(self, step: int, last_eval: float | None, info: str | None,
                    final: bool = False, logged: bool = False) -> None:  # fmt: skip
        self._eval = last_eval if last_eval is not None else self._eval
        self._info = info if info is not None else self._info
        now, (then, then_step) = time.monotonic(), self._last_line
        # (at the log steps only, but for work shown beside them, a reward fit: every while)
        quiet = self._at_logs and not self._info
        if step < self.total and not logged and (quiet or now - then < PLAIN_EVERY_S):
            return
        if step >= self.total and last_eval is None and not final and self._label:
            self._final_step = step  # the last line waits for the final evaluation
            return
        self._final_step = None
        if not self._at_logs or self._rate is None:
            self._rate = (step - then_step) / max(now - then, 1e-9)
        title = "" if self._title == "training" else f"{self._title}: "
        evals = f", {self._label} {self._fmt(self._eval)}" if self._label else ""
        info = f", {self._info}" if self._info else ""
        eta = self._eta(step) if step < self.total else "-"
        left = f", {eta} left" if eta != "-" else ""
        print(f"{title}step {step:,}/{self.total:,} ({100 * step / self.total:.0f}%), "
              f"{self._fmt_rate()} {self._unit}/s{left}{evals}{info}", flush=True)  # fmt: skip
        self._last_line = (now, step)

    def _fmt(self, value: float | None) -> str:
        return "(none yet)" if value is None else f"{value:,.{self._digits}f}"
