"""SIGINT and SIGTERM during a judging run: stop the load at once, keep every record.

On the first signal every client stops: requests in flight end at once and still return
their records (saved by their callers as usual), and nothing new is sent. A quarter of a
second later the programme is cancelled wherever it stands; `judge` then writes a sealed
partial bundle whose outcome is `hold` for the reason `interrupted`. A second signal
cancels at once. SIGKILL cannot be caught: the bundle then holds every record written up
to that moment (each line is appended and flushed whole) and no manifest.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from golive.results import INTEGRITY_RESULT, CheckResult, Status
from golive.verdict.document import InterruptionEntry

T = TypeVar("T")
CANCEL_AFTER_S = 0.25  # callers save the aborted requests' records in this time
CHECK_ID = "golive.interrupted"


class Stoppable(Protocol):
    def stop(self, reason: str) -> int: ...


@dataclass(frozen=True, slots=True)
class Interruption:
    signal: str
    at: float  # wall clock
    aborted_in_flight: int
    stopped_in_s: float  # from the signal until the programme had ended

    def entry(self) -> InterruptionEntry:
        """verdict.json `interrupted`."""
        return InterruptionEntry(
            signal=self.signal,
            at=dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(),
            stopped_in_s=round(self.stopped_in_s, 3),
        )

    def check(self) -> CheckResult:
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.ERROR,
            f"golive was interrupted by {self.signal}: the load stopped "
            f"{self.stopped_in_s:.2f} s later ({self.aborted_in_flight} request(s) in flight "
            "were ended and recorded); the evidence is partial, so nothing can be approved",
            {
                "signal": self.signal,
                "aborted_in_flight": self.aborted_in_flight,
                "stopped_in_s": round(self.stopped_in_s, 3),
            },
        )


class Guard:
    """Runs one programme with SIGINT/SIGTERM turned into an orderly, recorded stop."""

    def __init__(self, clients: Sequence[Stoppable]) -> None:
        self._clients = list(clients)
        self._signal: str | None = None
        self._at = 0.0
        self._t0 = 0
        self._aborted = 0
        self.interruption: Interruption | None = None

    def watch(self, client: Stoppable) -> None:
        """Also stop this client on a signal."""
        self._clients.append(client)

    async def run(self, coro: Awaitable[T]) -> T | None:
        """The programme's result, or None when a signal stopped it (see `interruption`)."""
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(coro)
        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig, task)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread (e.g. embedded): signals keep their default
            installed.append(sig)
        try:
            return await task
        except asyncio.CancelledError:
            if self._signal is None:
                raise
            return None
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            if self._signal is not None:
                self.interruption = Interruption(
                    self._signal,
                    self._at,
                    self._aborted,
                    (time.perf_counter_ns() - self._t0) / 1e9,
                )

    def _on_signal(self, sig: signal.Signals, task: asyncio.Future[Any]) -> None:
        if self._signal is not None:  # a second signal: no more grace
            task.cancel()
            return
        self._signal = sig.name
        self._at = time.time()
        self._t0 = time.perf_counter_ns()
        reason = f"interrupted by {sig.name}"
        self._aborted = sum(client.stop(reason) for client in self._clients)
        asyncio.get_running_loop().call_later(CANCEL_AFTER_S, task.cancel)
