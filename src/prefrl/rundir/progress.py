"""A rich progress bar for training: steps, steps/s, last evaluation return."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class TrainingProgress:
    def __init__(
        self, total: int, start: int, enabled: bool = True, last_eval: float | None = None
    ):
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} steps/s"),
            TextColumn("eval return {task.fields[eval]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            disable=not enabled,
        )
        self._task = self._progress.add_task(
            "train", total=total, completed=start, rate="-", eval=_fmt(last_eval), info=""
        )

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def say(self, message: str) -> None:
        """Print a line above the bar (or plainly when the bar is off)."""
        self._progress.console.print(message)

    def update(self, step: int, last_eval: float | None = None, info: str | None = None) -> None:
        if not self.enabled:
            return
        fields = {}
        task = self._progress.tasks[0]
        if task.speed:
            fields["rate"] = f"{task.speed:,.0f}"
        if last_eval is not None:
            fields["eval"] = _fmt(last_eval)
        if info is not None:
            fields["info"] = info
        self._progress.update(self._task, completed=step, **fields)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
