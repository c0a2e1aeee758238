"""The loop's turn budget for answers' work (traffic/loop_turns.py)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import pytest

from golive.traffic.loop_turns import LoopTurns
from tests.helpers.loop_turns import TurnCounter, busy

WORK_NS = 200_000  # an answer's parse and bundle line, about


async def _burst(lanes: int, run: Callable[[Callable[[], int]], object]) -> dict[int, int]:
    """`lanes` lanes wake in one turn and each does one answer's work: how many works each
    turn of the loop ran."""
    counter = TurnCounter()
    per_turn: dict[int, int] = {}
    wake = asyncio.Event()

    def work() -> int:
        busy(WORK_NS)
        per_turn[counter.turn] = per_turn.get(counter.turn, 0) + 1
        return counter.turn

    async def lane() -> None:
        await wake.wait()
        result = run(work)
        if asyncio.iscoroutine(result):
            await result

    lanes_run = [asyncio.ensure_future(lane()) for _ in range(lanes)]
    await asyncio.sleep(0)
    counter.start()
    wake.set()
    await asyncio.gather(*lanes_run)
    counter.stop()
    return per_turn


async def test_a_burst_of_answers_is_spread_over_turns_a_budget_each() -> None:
    """200 answers that end together (a GPU engine's batch): without the budget all 200 are
    parsed in one turn of the loop (40 ms of CPU with no read or timer served between); with
    a 1 ms budget no turn runs more than the budget's worth (5 works of 0.2 ms) plus the one
    that crosses it, and every answer's work still runs."""
    unbounded = await _burst(200, lambda work: work())
    assert max(unbounded.values()) == 200
    turns = LoopTurns(budget_ns=1_000_000)
    bounded = await _burst(200, turns.run)
    assert sum(bounded.values()) == 200
    assert max(bounded.values()) <= 1_000_000 // WORK_NS + 1
    assert len(bounded) >= 200 // (1_000_000 // WORK_NS + 1)
    assert turns.deferred > 0


async def test_work_runs_in_the_order_asked_and_at_once_when_the_turn_has_budget() -> None:
    """A lone answer's work runs at once (no extra turn); queued work keeps the order in which
    lanes asked, so the bundle's records keep the order their answers ended in."""
    turns = LoopTurns(budget_ns=1_000_000)
    assert await turns.run(lambda: "now") == "now"
    assert turns.deferred == 0
    order: list[int] = []

    def work(i: int) -> Callable[[], None]:
        def run() -> None:
            busy(WORK_NS)
            order.append(i)

        return run

    await asyncio.gather(*(turns.run(work(i)) for i in range(40)))
    assert order == list(range(40))
    assert turns.deferred > 0


async def test_a_failing_work_raises_in_its_own_lane_only() -> None:
    """The work that raises raises in the lane that asked for it; the others get their
    results."""
    turns = LoopTurns(budget_ns=0)  # every work waits for a slice

    def fails() -> int:
        raise ValueError("unreadable")

    results = await asyncio.gather(
        turns.run(lambda: 1), turns.run(fails), turns.run(lambda: 3), return_exceptions=True
    )
    assert results[0] == 1
    assert results[2] == 3
    assert isinstance(results[1], ValueError)


async def test_a_lane_cancelled_while_waiting_still_has_its_work_done() -> None:
    """A record waiting for its slice is saved even when its lane is cancelled meanwhile (a
    window aborted): nothing sent goes unrecorded."""
    turns = LoopTurns(budget_ns=0)
    done: list[str] = []
    lane = asyncio.ensure_future(turns.run(lambda: done.append("saved")))
    await asyncio.sleep(0)
    lane.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lane
    for _ in range(3):
        await asyncio.sleep(0)
    assert done == ["saved"]


async def test_a_settle_runs_the_work_still_waiting_in_order() -> None:
    """At a watchdog abort or an interrupt (`run_schedule` settles the turns) every work still
    waiting runs at once and in order: a record is written in its own window's stream, never
    in the next."""
    turns = LoopTurns(budget_ns=0)
    done: list[int] = []
    lanes = [asyncio.ensure_future(turns.run(functools.partial(done.append, i))) for i in range(3)]
    await asyncio.sleep(0)
    turns.settle()
    assert done == [0, 1, 2]
    await asyncio.gather(*lanes)


async def test_settling_while_the_drain_waits_for_its_turn_leaves_it_nothing_to_crash_on() -> None:
    """A watchdog abort or an interrupt settles the work the drain was about to run: the drain
    then finds nothing waiting and ends cleanly (no 'pop from an empty deque' in a task nobody
    awaits)."""
    turns = LoopTurns(budget_ns=0)
    lane = asyncio.ensure_future(turns.run(lambda: "saved"))
    await asyncio.sleep(0)  # the lane queues its work and starts the drain
    await asyncio.sleep(0)  # the drain waits for its next turn
    drain = turns._drain
    assert drain is not None
    turns.settle()
    assert await lane == "saved"
    await drain
    assert drain.exception() is None


async def test_a_failed_work_whose_lane_is_gone_is_raised_at_the_settle() -> None:
    """A save that fails after its lane was cancelled is not dropped: the window's settle
    raises it, so the run ends on the error instead of a silent gap in the records."""
    turns = LoopTurns(budget_ns=0)

    def fails() -> None:
        raise OSError("disk full")

    lane = asyncio.ensure_future(turns.run(fails))
    await asyncio.sleep(0)
    lane.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lane
    with pytest.raises(OSError, match="disk full"):
        turns.settle()
