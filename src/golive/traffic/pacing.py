"""When a rate schedule's next request is due: the loop is woken at that moment, not near it.

asyncio's timers go through `epoll_wait`, whose timeout counts whole milliseconds: a sleep
wakes up to 1 ms late, and the old remedy (wake 1.1 ms early, then yield to the loop until
due) kept the loop spinning whenever the next moment was under 1.1 ms away: at 2,000/s, a
whole core. On Linux `TimerPacer` arms a `timerfd` (CLOCK_MONOTONIC, the clock
`perf_counter_ns` reads) at an absolute moment 150 µs before each request is due, as AIPerf
paces, and yields to the loop only for that last stretch. Where there is no timerfd (not
Linux, or a sandbox without it) `SpinPacer` keeps the old way.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from typing import Protocol

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1

LEAD_NS = 150_000
"""TimerPacer wakes this long before the moment and yields to the loop for the rest: a
timerfd wake-up through epoll takes ~0.1 ms (an idle vCPU longer); see docs/performance.md."""

SPIN_NS = 1_100_000
"""SpinPacer wakes this long before a request is due and yields to the loop until then: the
loop's timers wake up to 1 ms late (epoll counts milliseconds)."""


class Pacer(Protocol):
    async def until(self, due_ns: int) -> None:
        """Return at `due_ns` (a `perf_counter_ns` moment), or at once if it has passed."""
        ...

    def close(self) -> None: ...


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


class TimerPacer:
    """A Linux timerfd on the running loop; one waiter at a time (the arrivals loop)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        libc = ctypes.CDLL(None, use_errno=True)
        self._settime = libc.timerfd_settime
        self._fd = int(libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC))
        if self._fd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_create: {os.strerror(errno)}")
        self._spec = _Itimerspec()
        self._waiter: asyncio.Future[None] | None = None
        self._loop.add_reader(self._fd, self._fired)

    async def until(self, due_ns: int) -> None:
        wake_ns = due_ns - LEAD_NS
        if wake_ns > time.perf_counter_ns():
            await self._timer(wake_ns)
        await _yield_until(due_ns)

    async def _timer(self, wake_ns: int) -> None:
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = divmod(wake_ns, 1_000_000_000)
        if self._settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_settime: {os.strerror(errno)}")
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)


class SpinPacer:
    """The loop's timer to within `SPIN_NS`, then yielding to the loop until due."""

    async def until(self, due_ns: int) -> None:
        delay = (due_ns - SPIN_NS - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        await _yield_until(due_ns)

    def close(self) -> None:
        return None


async def _yield_until(due_ns: int) -> None:
    """The last stretch before a moment: yield to the loop (other work runs) until it."""
    while time.perf_counter_ns() < due_ns:
        await asyncio.sleep(0)


def pacer() -> Pacer:
    """The timerfd pacer where the platform has one and `perf_counter_ns` reads its clock,
    else the spinning one. Call inside the running loop."""
    clock = time.get_clock_info("perf_counter").implementation
    if sys.platform == "linux" and clock == "clock_gettime(CLOCK_MONOTONIC)":
        try:
            return TimerPacer()
        except (OSError, AttributeError):
            pass
    return SpinPacer()
