"""A bound on the work one turn of the event loop does for answers that end together.

A GPU engine ends a whole batch's requests in one step: at concurrency 256, hundreds of
answers complete within a millisecond, their lanes wake in the same turn of the loop, and
each parses its answer, writes its bundle line and sends its next request (about 0.3 ms of CPU)
before the loop looks at its sockets or timers again. One such turn held golive's loop for
50 to 90 ms on an H200 (issue 33): every read stamped in that time was stamped late, and the
loop-lag figure of `golive.client_headroom` rose with it.

`LoopTurns.run(work)` runs an answer's work within a budget per turn: at once while this
turn has spent less than the budget, otherwise in order after the work already waiting, in
later turns, a budget's worth each. The lane waits for its own work; the loop serves
sockets and timers between the slices, so a stamp is at most about a budget late. The work
itself, and its order, is what it was. A window's watchdog abort and its cancellation settle
whatever still waits (`settle`), before lanes are cancelled, the ledger is written or the
bundle sealed; a window that ends normally has nothing of its own waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

_T = TypeVar("_T")

TURN_BUDGET_NS = 1_000_000  # 1 ms: what one turn may spend on answers' work


class LoopTurns:
    """Answers' work in budgeted slices of the loop's turns, in the order it was asked for."""

    def __init__(self, budget_ns: int = TURN_BUDGET_NS) -> None:
        self.budget_ns = budget_ns
        self._turn_started: int | None = None  # when this turn's first work ran
        self._waiting: deque[tuple[Callable[[], Any], asyncio.Future[Any]]] = deque()
        self._drain: asyncio.Task[None] | None = None
        self.deferred = 0  # works that waited for a later turn (a figure for the docs/tests)
        self._orphaned: list[Exception] = []  # failures of works whose lane was cancelled

    async def run(self, work: Callable[[], _T]) -> _T:
        """`work()`'s result: run now if this turn has budget left and nothing waits, else
        queued behind the waiting work and run in a later turn. Its exception is raised here."""
        now = time.perf_counter_ns()
        if not self._waiting:
            if self._turn_started is None:
                self._turn_started = now
                asyncio.get_running_loop().call_soon(self._next_turn)
            if now - self._turn_started < self.budget_ns:
                return work()
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._waiting.append((work, future))
        self.deferred += 1
        if self._drain is None:
            self._drain = asyncio.ensure_future(self._drain_waiting())
        return await future

    def settle(self) -> None:
        """Run every work still waiting, now: a window's watchdog abort or its cancellation
        (an interrupt) records every answer that came back before the lanes are
        cancelled, the ledger is written or the bundle sealed. A work that failed where no
        lane waits for it any more is raised here."""
        self._run_waiting()
        if self._orphaned:
            failed = self._orphaned[0]
            self._orphaned.clear()
            raise failed

    def _run_waiting(self) -> None:
        while self._waiting:
            _settle(*self._waiting.popleft(), self._orphaned)

    def _next_turn(self) -> None:
        self._turn_started = None

    async def _drain_waiting(self) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(0)  # the rest of this turn: sockets, timers, then a slice
                if not self._waiting:  # settled meanwhile
                    break
                start = time.perf_counter_ns()
                _settle(*self._waiting.popleft(), self._orphaned)  # one a turn at least
                while self._waiting and time.perf_counter_ns() - start < self.budget_ns:
                    _settle(*self._waiting.popleft(), self._orphaned)
        finally:  # cancelled with work waiting (the loop is closing): nothing is dropped
            self._run_waiting()
            self._drain = None


def _settle(
    work: Callable[[], Any], future: asyncio.Future[Any], orphaned: list[Exception]
) -> None:
    """Run `work` (even when its lane was cancelled meanwhile: a record is saved whatever
    became of the lane that waited for it) and hand its result or exception to the lane;
    an exception no lane waits for any more is kept in `orphaned`."""
    try:
        result = work()
    except Exception as exc:  # the lane that asked raises it
        if future.done():
            orphaned.append(exc)
        else:
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(result)


_PER_LOOP: WeakKeyDictionary[asyncio.AbstractEventLoop, LoopTurns] = WeakKeyDictionary()


def loop_turns() -> LoopTurns:
    """The running loop's one `LoopTurns` (every lane of every window shares its turns)."""
    loop = asyncio.get_running_loop()
    turns = _PER_LOOP.get(loop)
    if turns is None:
        turns = _PER_LOOP[loop] = LoopTurns()
    return turns
