"""A bare event loop's lag beside a load: the host's own wake-up latency, for issue 33.

    python bench/ticker.py OUT.jsonl &   (SIGTERM ends it)

One asyncio loop in its own process doing nothing but `golive.client_headroom`'s 10 ms tick,
so its lateness is the host's (the scheduler, the sandbox's timers), not golive's work.
Writes one JSON line per 8 s: the wall clock at its end, the tick lag's p50, p99 and max in
ms, and the tick count.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

TICK_S, SPAN_S = 0.01, 8.0


async def tick(out: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    with open(out, "a") as sink:
        while not stop.is_set():
            lags: list[float] = []
            end = time.perf_counter() + SPAN_S
            while time.perf_counter() < end and not stop.is_set():
                start = time.perf_counter()
                await asyncio.sleep(TICK_S)
                lags.append(max(0.0, (time.perf_counter() - start - TICK_S) * 1000))
            lags.sort()
            row = {
                "at": round(time.time(), 1),
                "p50_ms": round(lags[len(lags) // 2], 3),
                "p99_ms": round(lags[int(0.99 * len(lags))], 3),
                "max_ms": round(lags[-1], 3),
                "ticks": len(lags),
            }
            sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    asyncio.run(tick(sys.argv[1]))
