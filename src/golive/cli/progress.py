"""The progress bar long phases show on stderr: phase, elapsed time, requests, errors."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn


class RichProgress:
    """Implements `checks.capacity.PhaseProgress` with a rich progress display."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[requests]} requests, {task.fields[errors]} errors"),
            console=console,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def phase(self, name: str, total_s: float) -> None:
        if self._task is not None:
            self._progress.stop_task(self._task)
        self._task = self._progress.add_task(f"{name} (~{total_s:.0f} s)", requests=0, errors=0)

    def record(self, ok: bool) -> None:
        if self._task is None:
            return
        fields = self._progress.tasks[self._task].fields
        self._progress.update(
            self._task,
            requests=fields["requests"] + 1,
            errors=fields["errors"] + (0 if ok else 1),
        )
