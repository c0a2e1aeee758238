"""Where a long run is, on stderr: a progress bar on a terminal; elsewhere (CI logs, a pipe)
a plain line when a phase starts and every 10 s while it runs — phase, requests, errors,
elapsed and expected — so a log shows where a run is and that it is still moving."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

PLAIN_EVERY_S = 10.0


@dataclass(slots=True)
class _Phase:
    name: str
    total_s: float | None
    total_requests: int | None
    started: float
    requests: int = 0
    errors: int = 0

    def line(self, now: float) -> str:
        """`golive: smoke — 12 requests, 0 errors, 35 s (expected ~60 s)`."""
        sent = f"{self.requests}/{self.total_requests}" if self.total_requests else self.requests
        expected = f" of ~{self.total_s:.0f} s" if self.total_s else ""
        return (
            f"golive: {self.name} — {sent} requests, {self.errors} errors, "
            f"{now - self.started:.0f} s{expected}"
        )


class RichProgress:
    """Implements `checks.context.PhaseProgress`: a rich display on a terminal, plain lines
    elsewhere (`plain` forces either)."""

    def __init__(self, console: Console, plain: bool | None = None) -> None:
        self._console = console
        self._plain = not console.is_terminal if plain is None else plain
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[requests]} requests, {task.fields[errors]} errors"),
            console=console,
        )
        self._task: TaskID | None = None
        self._phase: _Phase | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> RichProgress:
        if self._plain:
            self._ticker = threading.Thread(target=self._tick, name="golive-progress", daemon=True)
            self._ticker.start()
        else:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
        else:
            self._progress.stop()

    def phase(self, name: str, total_s: float | None = None, requests: int | None = None) -> None:
        with self._lock:
            self._phase = _Phase(name, total_s, requests, time.monotonic())
        if self._plain:
            self._print_line()
            return
        if self._task is not None:
            self._progress.stop_task(self._task)
        shown = f"{name} (~{total_s:.0f} s)" if total_s else name
        self._task = self._progress.add_task(shown, requests=0, errors=0)

    def record(self, ok: bool) -> None:
        with self._lock:
            if self._phase is not None:
                self._phase.requests += 1
                self._phase.errors += 0 if ok else 1
        if self._plain or self._task is None:
            return
        fields = self._progress.tasks[self._task].fields
        self._progress.update(
            self._task,
            requests=fields["requests"] + 1,
            errors=fields["errors"] + (0 if ok else 1),
        )

    def _print_line(self) -> None:
        with self._lock:
            line = None if self._phase is None else self._phase.line(time.monotonic())
        if line is not None:
            self._console.print(line, highlight=False, markup=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(PLAIN_EVERY_S):
            self._print_line()
