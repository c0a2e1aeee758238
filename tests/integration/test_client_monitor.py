"""golive's client monitor against a starved event loop. The test times golive's own loop
against the wall clock, so it lives in tests/integration: `make test` runs it in its second
pass (`client_timed`); on a niced worker beside the real vLLM its calm run's lag p99 (27.9 ms)
once came out above the starved run's (19.3 ms)."""

from __future__ import annotations

import asyncio
import threading

from golive.evidence.sampling import running_beside
from golive.traffic.headroom import ClientMonitor, HeadroomPolicy, bottleneck
from tests.helpers.gil import hold_the_gil


async def test_the_monitor_sees_a_starved_event_loop() -> None:
    """The client monitor measures a busy thread starving the event loop as lag and CPU."""
    idle, busy = ClientMonitor(), ClientMonitor()
    async with running_beside(idle.watch()):
        await asyncio.sleep(0.5)
    stop = threading.Event()
    hog = threading.Thread(target=hold_the_gil, args=(stop,), daemon=True)
    hog.start()
    try:
        async with running_beside(busy.watch()):
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        hog.join()
    calm, starved = idle.figures([]), busy.figures([])
    assert calm.cpu_share is not None
    assert starved.cpu_share is not None
    assert starved.cpu_share > calm.cpu_share  # the hog thread is golive's process too
    assert starved.ticks < calm.ticks
    assert starved.loop_lag_p99_ms is not None
    assert calm.loop_lag_p99_ms is not None
    assert starved.loop_lag_p99_ms > calm.loop_lag_p99_ms
    # the busy thread holds the GIL for whole switch intervals (5 ms): the ticks are late
    assert bottleneck(starved, HeadroomPolicy(max_lag_ms=0.5), 0.001) is not None
