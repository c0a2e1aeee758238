"""Load schedules: fixed concurrency (closed loop) and fixed rate (Poisson or constant arrivals).

Every schedule is bounded three ways and stops by itself: a duration, a request cap and a
concurrency cap (workers, or `max_in_flight` for arrivals). The watchdog holds the wall
clock: requests still in flight when the duration ends get `drain_s` to finish; then, when
the caller gave `abort`, they are ended through it and still return their records
(`cancelled`), so every request sent is recorded; whatever has not returned one second
later is cancelled outright (counted in `cancelled`). A phase of N seconds therefore ends
by N + drain_s + 1 s even when the target hangs.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from golive.traffic.loop_turns import loop_turns
from golive.traffic.pacing import pacer
from golive.traffic.records import RequestRecord

Send = Callable[[Mapping[str, Any], str, int], Awaitable[RequestRecord]]
"""How a schedule sends one request: (body, label, scheduled_ns) -> record."""

MakeBody = Callable[[int], Mapping[str, Any]]
"""The workload: request number -> request body."""

OnRecord = Callable[[RequestRecord], None]

Abort = Callable[[str], object]
"""Ends the requests in flight at once, each returning its record (`abort_in_flight`)."""

ABORT_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class Schedule:
    """A bounded load shape. `rate_per_s` and `arrival` are used only when `mode == "rate"`."""

    mode: Literal["concurrency", "rate"]
    duration_s: float
    max_requests: int
    concurrency: int = 1
    rate_per_s: float = 1.0
    max_in_flight: int = 64
    drain_s: float = 60.0
    seed: int = 0
    arrival: Literal["poisson", "constant"] = "poisson"

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.max_requests <= 0:
            raise ValueError("a schedule needs a positive duration and request cap")
        if self.mode == "concurrency" and self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.mode == "rate" and self.rate_per_s <= 0:
            raise ValueError("rate must be positive")


StoppedBy = Literal["duration", "request_cap", "watchdog", "stop"]


@dataclass(frozen=True, slots=True)
class LoadResult:
    records: tuple[RequestRecord, ...]
    wall_s: float
    stopped_by: StoppedBy
    cancelled: int  # tasks cancelled without a record (no `abort`, or it did not help)
    peak_in_flight: int = 0


def poisson_offsets_ns(rate_per_s: float, count: int, seed: int) -> list[int]:
    """Arrival offsets (ns from start) of a Poisson process; pure, seeded, reproducible."""
    return list(itertools.islice(_poisson(rate_per_s, seed), count))


def _poisson(rate_per_s: float, seed: int) -> Iterator[int]:
    rng = random.Random(seed)  # noqa: S311 - load shaping, not cryptography
    t = 0.0
    while True:
        t += rng.expovariate(rate_per_s)
        yield int(t * 1e9)


def arrival_offsets_ns(schedule: Schedule) -> Iterator[int]:
    """When each request of a rate schedule is due (ns from start), lazily: a request cap of
    millions costs nothing up front. Poisson arrivals, or evenly spaced ones."""
    if schedule.arrival == "constant":
        gap = 1e9 / schedule.rate_per_s
        offsets: Iterator[int] = (int(i * gap) for i in itertools.count())
    else:
        offsets = _poisson(schedule.rate_per_s, schedule.seed)
    return itertools.islice(offsets, schedule.max_requests)


async def run_schedule(
    schedule: Schedule,
    send: Send,
    make_body: MakeBody,
    label: str,
    on_record: OnRecord | None = None,
    stop: asyncio.Event | None = None,
    abort: Abort | None = None,
) -> LoadResult:
    """Drive `send` with bodies from `make_body` under `schedule`; return every record.

    Setting `stop` ends the issuing of new requests at once (e.g. the engine died)."""
    records: list[RequestRecord] = []
    start_ns = time.perf_counter_ns()
    deadline_ns = start_ns + int(schedule.duration_s * 1e9)
    issued = 0
    in_flight = peak = 0

    async def counted(body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await send(body, label, scheduled_ns)
        finally:
            in_flight -= 1

    def keep(record: RequestRecord) -> None:
        records.append(record)
        if on_record is not None:
            on_record(record)

    def take() -> int | None:
        nonlocal issued
        if issued >= schedule.max_requests or time.perf_counter_ns() >= deadline_ns:
            return None
        if stop is not None and stop.is_set():
            return None
        issued += 1
        return issued - 1

    if schedule.mode == "concurrency":
        workers = [
            _worker(take, counted, make_body, label, keep) for _ in range(schedule.concurrency)
        ]
        tasks = [asyncio.ensure_future(w) for w in workers]
    else:
        tasks = [
            asyncio.ensure_future(
                _arrivals(schedule, start_ns, take, counted, make_body, label, keep)
            )
        ]
    try:
        overran, cancelled = await _bounded_wait(tasks, deadline_ns, schedule, abort)
    except asyncio.CancelledError:
        # the window itself was cancelled (a load worker beside it died, an interrupt): its
        # lanes must not outlive it, or they go on sending and saving into a bundle already
        # sealed; the answers that came back are recorded first, before the ledger is written
        loop_turns().settle()
        await cancel_all(tasks)
        raise
    wall_s = (time.perf_counter_ns() - start_ns) / 1e9
    stopped_by: StoppedBy = "duration"
    if overran:
        stopped_by = "watchdog"
    elif issued >= schedule.max_requests:
        stopped_by = "request_cap"
    elif stop is not None and stop.is_set():
        stopped_by = "stop"
    return LoadResult(tuple(records), wall_s, stopped_by, cancelled, peak)


async def _worker(
    take: Callable[[], int | None],
    send: Send,
    make_body: MakeBody,
    label: str,
    keep: OnRecord,
) -> None:
    turns = loop_turns()
    if (n := take()) is None:
        return
    body = make_body(n)  # a window's start: every lane's first request goes in this turn
    while True:
        keep(await send(body, label, time.perf_counter_ns()))
        if (n := take()) is None:
            return
        # the next body within the loop's turn budget, as the answer was recorded: lanes whose
        # answers ended in one engine step do not build their next bodies all in one turn
        body = await turns.run(functools.partial(make_body, n))


async def _arrivals(
    schedule: Schedule,
    start_ns: int,
    take: Callable[[], int | None],
    send: Send,
    make_body: MakeBody,
    label: str,
    keep: OnRecord,
) -> None:
    gate = asyncio.Semaphore(schedule.max_in_flight)
    in_flight: set[asyncio.Task[None]] = set()
    due = pacer()  # a timerfd on Linux: woken at the moment, nothing spins

    async def one(n: int, scheduled_ns: int) -> None:
        async with gate:  # a full gate holds the send: its lag counts from scheduled_ns
            keep(await send(make_body(n), label, scheduled_ns))

    try:
        for offset in arrival_offsets_ns(schedule):
            scheduled_ns = start_ns + offset
            await due.until(scheduled_ns)
            n = take()
            if n is None:
                break
            task = asyncio.ensure_future(one(n, scheduled_ns))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        if in_flight:
            await asyncio.gather(*in_flight)
    finally:
        due.close()
        for task in in_flight:
            task.cancel()


async def cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel `tasks` and wait until each has ended (whatever it raised)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _bounded_wait(
    tasks: Sequence[asyncio.Future[None]],
    deadline_ns: int,
    schedule: Schedule,
    abort: Abort | None,
) -> tuple[bool, int]:
    """The watchdog: wait for the tasks until the deadline plus the drain time; then end the
    requests in flight through `abort` (their records come back), and cancel whatever is
    still running a second later. Returns (overran, tasks cancelled)."""
    remaining = max(0.0, (deadline_ns - time.perf_counter_ns()) / 1e9) + schedule.drain_s
    _, pending = await asyncio.wait(tasks, timeout=remaining)
    overran = bool(pending)
    if pending and abort is not None:
        abort(
            f"watchdog: the phase's {schedule.duration_s:g} s plus {schedule.drain_s:g} s "
            "drain had passed"
        )
        _, pending = await asyncio.wait(pending, timeout=ABORT_GRACE_S)
    if pending:
        # every answer that came back is recorded, and its lane keeps it, before the lanes
        # still running are cancelled (those wait on the network: no record to lose)
        loop_turns().settle()
        await asyncio.sleep(0)
        pending = {task for task in pending if not task.done()}
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return overran, len(pending)
