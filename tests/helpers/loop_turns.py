"""Watching the event loop's turns, for the tests of its turn budget (traffic/loop_turns.py)
and of the lanes that work within it (traffic/schedule.py)."""

from __future__ import annotations

import asyncio
import time


def busy(ns: int) -> None:
    """Hold the CPU (and the loop) for `ns` nanoseconds: the cost of one piece of work."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


class TurnCounter:
    """Counts the loop's turns: a callback that re-arms itself once a turn."""

    def __init__(self) -> None:
        self.turn = 0
        self._handle: asyncio.Handle | None = None

    def start(self) -> None:
        self.turn += 1
        self._handle = asyncio.get_running_loop().call_soon(self.start)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
