"""Load schedules stop by themselves: request caps, duration caps, bounded concurrency."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Mapping
from typing import Any

import pytest

from golive.traffic.loop_turns import loop_turns
from golive.traffic.records import RequestRecord, Timings
from golive.traffic.schedule import Schedule, poisson_offsets_ns, run_schedule
from tests.helpers.loop_turns import TurnCounter, busy


class SlowServer:
    """Answers after `delay` seconds and remembers the most requests it saw at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.peak = 0
        self.bodies: list[Mapping[str, Any]] = []

    async def send(self, body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.bodies.append(body)
        sent = time.perf_counter_ns()
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return RequestRecord(
            "r",
            label,
            "POST",
            "u",
            body,
            False,
            0.0,
            Timings(scheduled_ns, sent, end_ns=time.perf_counter_ns()),
            status=200,
        )


async def test_concurrency_is_bounded_and_the_request_cap_stops_it() -> None:
    """Four workers never exceed four in flight; the cap of 10 stops at exactly 10."""
    server = SlowServer(0.01)
    result = await run_schedule(
        Schedule("concurrency", duration_s=30, max_requests=10, concurrency=4),
        server.send,
        lambda n: {"n": n},
        "t",
    )
    assert len(result.records) == 10
    assert server.peak == 4
    assert result.stopped_by == "request_cap"
    assert sorted(b["n"] for b in server.bodies) == list(range(10))


async def test_duration_cap_stops_a_long_run() -> None:
    """With a huge request cap, the duration ends the run close to its deadline."""
    server = SlowServer(0.02)
    result = await run_schedule(
        Schedule("concurrency", duration_s=0.3, max_requests=1_000_000, concurrency=2, drain_s=1),
        server.send,
        lambda n: {"n": n},
        "t",
    )
    assert result.stopped_by == "duration"
    assert 0.25 < result.wall_s < 1.0
    assert 5 < len(result.records) < 40


async def test_requests_that_outlive_the_drain_are_cancelled() -> None:
    """A hung request is cancelled after duration + drain; the run still returns."""
    server = SlowServer(10.0)
    result = await run_schedule(
        Schedule("concurrency", duration_s=0.1, max_requests=5, concurrency=2, drain_s=0.2),
        server.send,
        lambda n: {"n": n},
        "t",
    )
    assert result.cancelled == 2
    assert result.records == ()
    assert result.wall_s < 1.0


async def test_rate_mode_keeps_its_schedule_and_records_lag() -> None:
    """Poisson arrivals at 200/s for 25 requests; each record keeps its scheduled time."""
    server = SlowServer(0.0)
    result = await run_schedule(
        Schedule("rate", duration_s=5, max_requests=25, rate_per_s=200, seed=3),
        server.send,
        lambda n: {"n": n},
        "t",
    )
    assert len(result.records) == 25
    lags = [(r.timings.sent_ns - r.timings.scheduled_ns) / 1e6 for r in result.records]
    assert max(lags) < 200  # ms: the sender keeps up with the schedule


def test_poisson_offsets_are_reproducible_and_have_the_right_mean() -> None:
    """Poisson arrivals are reproducible from their seed, ordered, and have the asked mean gap."""
    a = poisson_offsets_ns(10.0, 2000, seed=1)
    assert a == poisson_offsets_ns(10.0, 2000, seed=1)
    assert a == sorted(a)
    mean_gap_s = a[-1] / len(a) / 1e9
    assert mean_gap_s == pytest.approx(0.1, rel=0.1)


def test_unbounded_schedules_are_refused() -> None:
    """A schedule without a positive duration is refused: load is always bounded."""
    with pytest.raises(ValueError, match="positive duration"):
        Schedule("concurrency", duration_s=0, max_requests=1)


def _answered(label: str, scheduled_ns: int) -> RequestRecord:
    now = time.perf_counter_ns()
    return RequestRecord(
        "r", label, "POST", "u", {}, True, 0.0, Timings(scheduled_ns, now, end_ns=now)
    )


def _saved_in(seconds: float, saved: list[int]) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    saved.append(1)


async def _answers_waiting_for_slices(cancel_window: bool) -> tuple[int, int, int]:
    """200 lanes whose answers all come back at once (the watchdog's abort) while every
    answer's work must wait for a slice of the loop (budget 0): (records the window kept,
    answers saved, requests sent). The requests sent are counted, not taken as 200: on a
    starved loop the 0.1 s window can end before every lane has sent (a busy CI machine
    saved 90 where 200 were assumed; whether 90 had been sent was not recorded)."""
    turns = loop_turns()
    budget, turns.budget_ns = turns.budget_ns, 0
    release = asyncio.Event()
    saved: list[int] = []
    sent: list[int] = []

    def abort(reason: str) -> int:
        release.set()
        return 200

    async def send(body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
        sent.append(1)
        await release.wait()
        record = _answered(label, scheduled_ns)
        await turns.run(lambda: _saved_in(0.01, saved))  # 200 x 10 ms: past the 1 s grace
        return record

    window = Schedule("concurrency", 0.05, 200, concurrency=200, drain_s=0.05)
    try:
        if cancel_window:  # an interrupt: the window is cancelled with answers waiting
            task = asyncio.ensure_future(run_schedule(window, send, lambda n: {}, "c200"))
            await asyncio.sleep(0.01)
            release.set()
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return 0, len(saved), len(sent)
        result = await run_schedule(window, send, lambda n: {}, "c200", abort=abort)
        return len(result.records), len(saved), len(sent)
    finally:
        turns.budget_ns = budget


async def test_a_watchdog_abort_keeps_every_answer_that_came_back_in_its_window() -> None:
    """The watchdog aborts 200 requests at once and their answers wait for slices of the
    loop: every answer is saved and kept in the window's records before any lane is
    cancelled, so the window's row agrees with its records (no no_data for a mismatch)."""
    kept, saved, sent = await _answers_waiting_for_slices(cancel_window=False)
    assert sent > 0
    assert saved == sent
    assert kept == sent


async def test_an_interrupted_window_saves_its_answers_before_it_ends() -> None:
    """A window cancelled (SIGINT) while answers wait for slices of the loop saves every one
    of them before its cancellation goes on: the ledger, written next, counts them, and
    nothing is written into the bundle after its seal."""
    _, saved, sent = await _answers_waiting_for_slices(cancel_window=True)
    assert sent > 0
    assert saved == sent


async def test_lanes_whose_answers_end_together_build_their_next_bodies_within_the_budget() -> None:
    """Sixteen lanes start at once (a window's start: every first request goes in that turn,
    so all sixteen are in flight together), and their answers end in one turn (an engine's
    batch): each next body takes 0.4 ms to build, so the loop's 1 ms budget per turn holds
    at most three of them and the rest are built in later turns, every one, in order. Built
    all at once, that turn would hold the loop 6.4 ms."""
    counter = TurnCounter()
    built_in: dict[int, list[int]] = {}

    def body(n: int) -> dict[str, int]:
        built_in.setdefault(counter.turn, []).append(n)
        busy(400_000)  # the cost of a long body
        return {"n": n}

    server = SlowServer(0.0)
    counter.start()
    try:
        result = await run_schedule(
            Schedule("concurrency", duration_s=30, max_requests=32, concurrency=16),
            server.send,
            body,
            "t",
        )
    finally:
        counter.stop()
    assert len(result.records) == 32
    assert server.peak == 16  # the window's concurrency, reached at its start
    first_turn = min(built_in)
    assert built_in[first_turn] == list(range(16))  # every lane's first body at once
    later = {t: ns for t, ns in built_in.items() if t != first_turn}
    assert max(len(ns) for ns in later.values()) <= 3, later
    assert [n for t in sorted(later) for n in later[t]] == list(range(16, 32))
    assert loop_turns()._waiting == collections.deque()  # nothing left waiting
