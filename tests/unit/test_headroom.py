"""Issue 19 §4: a verdict holds only if golive was not the bottleneck. Each load window
carries golive's own figures; a window where golive was short of CPU is not judged."""

from __future__ import annotations

import asyncio
import threading

import pytest

from golive.results import Status
from golive.traffic.headroom import (
    ClientFigures,
    ClientMonitor,
    HeadroomPolicy,
    bottleneck,
    headroom_check,
    worst,
)

POLICY = HeadroomPolicy()


def _figures(send: float = 0.3, loop: float = 0.4, cpu: float = 0.05) -> ClientFigures:
    return ClientFigures(0.1, send, send * 2, loop, loop * 2, cpu, 500, 2000)


@pytest.mark.parametrize(
    ("figures", "e2e_s", "why"),
    [
        (_figures(), 0.15, None),
        # golive burned most of a core: whatever the latencies say, they are golive's
        (_figures(cpu=0.95), 0.15, "golive used 95% of a core (limit 80%)"),
        (_figures(send=9.0), 0.15, "its send lag p99 was 9.0 ms (limit 5.0 ms)"),
        (_figures(loop=12.0), 0.15, "its event-loop lag p99 was 12.0 ms (limit 5.0 ms)"),
        # 12 ms of lag cannot move a judgement of 4-second requests (2% of the median: 80 ms)
        (_figures(loop=12.0), 4.0, None),
        (_figures(loop=95.0), 4.0, "event-loop lag p99 was 95.0 ms (limit 80.0 ms)"),
        # nothing measured: no finding either way
        (ClientFigures(None, None, None, None, None, None, 0, 0), 0.1, None),
    ],
)
def test_bottleneck(figures: ClientFigures, e2e_s: float, why: str | None) -> None:
    found = bottleneck(figures, POLICY, e2e_s)
    if why is None:
        assert found is None
    else:
        assert found is not None
        assert why in found
        assert "the client, not the server, was the bottleneck" in found


def _hog(stop: threading.Event) -> None:
    while not stop.is_set():  # pure Python: holds the GIL between switch intervals
        sum(range(1000))


async def test_the_monitor_sees_a_starved_event_loop() -> None:
    async with ClientMonitor() as idle:
        await asyncio.sleep(0.5)
    stop = threading.Event()
    hog = threading.Thread(target=_hog, args=(stop,), daemon=True)
    hog.start()
    try:
        async with ClientMonitor() as busy:
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        hog.join()
    calm, starved = idle.figures([]), busy.figures([])
    assert calm.cpu_share is not None
    assert starved.cpu_share is not None
    assert starved.cpu_share > calm.cpu_share  # the hog thread is golive's process too
    assert starved.ticks < calm.ticks
    assert bottleneck(starved, POLICY, 0.1) is not None


def test_the_check_passes_only_when_every_window_had_headroom() -> None:
    good = {"phase": "concurrency", "concurrency_cap": 4, "client": _figures().to_json()}
    short = {
        **good,
        "concurrency_cap": 8,
        "client": _figures(cpu=0.97).to_json(),
        "client_bottleneck": bottleneck(_figures(cpu=0.97), POLICY, 0.1),
    }
    passed = headroom_check([good, {**good, "client_bottleneck": None}])
    assert passed.status is Status.PASS
    assert "golive had headroom in every load window (2)" in passed.summary
    failed = headroom_check([good, short])
    assert failed.status is Status.FAIL
    assert failed.critical
    assert "1 of 2 load window(s) were limited by golive itself" in failed.summary
    assert "concurrency at concurrency 8" in failed.summary
    assert failed.measurements["cpu_share"] == 0.97
    assert headroom_check([{"phase": "x"}]).status is Status.NO_DATA


def test_figures_round_for_the_bundle() -> None:
    row = ClientFigures(0.12345, 1.23456, 2.0, 0.5, 0.9, 0.04567, 10, 100).to_json()
    assert row["send_lag_p99_ms"] == 1.235
    assert row["cpu_share"] == 0.046


def test_several_clients_speak_through_the_worst_of_them() -> None:
    """--ray: each client machine measures itself; one starved client makes the window
    golive's, however well the others did."""
    calm, starved = _figures(), _figures(loop=40.0, cpu=0.9)
    row = worst([calm, starved])
    assert row.loop_lag_p99_ms == 40.0
    assert row.cpu_share == 0.9
    assert row.requests == 1000
    assert bottleneck(worst([calm, calm]), POLICY, 0.2) is None
    assert worst([]).cpu_share is None
