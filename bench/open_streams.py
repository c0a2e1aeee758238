"""Ten thousand streams open at once from one golive process (issue 33): requests released at a
constant rate until `--streams` are open and receiving, each held open by nginx dripping its
answer (`/slow/o64`, 64 bytes/s); the send lag of every release, the event-loop lag while
they are all open, and golive's memory then.

    python bench/open_streams.py --streams 10000 --rate 2000 --hold 10

Starts its own nginx (bench/nginx.py) on `--nginx-cpu` (default CPU 1); golive runs where it is
started (pin it with taskset). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from drive import rss_mb
from golive.evidence.sampling import running_beside
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import ClientMonitor, collector_paused, thaw
from golive.traffic.records import RequestRecord
from golive.traffic.schedule import Schedule, run_schedule
from net import free_port
from nginx import Nginx
from sse import write_bodies


def _body(n: int) -> dict[str, Any]:
    return {
        "model": "bench-model",
        "messages": [{"role": "user", "content": f"request {n}: " + "hello " * 48}],
        "stream": True,
        "max_tokens": 64,
    }


async def open_streams(url: str, streams: int, rate: float, hold: float) -> dict[str, Any]:
    baseline = rss_mb()
    settings = ClientSettings(url, max_connections=streams, read_timeout_s=600)
    release_s = streams / rate
    async with TargetClient(settings) as client:

        async def send(body: Any, label: str, due: int) -> RequestRecord:
            return await client.chat(body, label, due)

        # released at `rate`; each stays open (nginx drips it) until the hold ends
        window = Schedule(
            "rate",
            release_s + hold,
            streams,
            rate_per_s=rate,
            arrival="constant",
            max_in_flight=streams,
            drain_s=5.0,
        )
        monitor = ClientMonitor()
        start = time.perf_counter()
        with collector_paused():
            async with running_beside(monitor.watch()):
                task = asyncio.ensure_future(run_schedule(window, send, _body, "open"))
                await asyncio.sleep(release_s + hold / 2)
                rss_open = rss_mb()
                open_now = client.in_flight
                ticks_open = sorted(monitor.lags_ms[-int(hold / 2 / 0.01) :])
                await asyncio.sleep(hold / 2)
                client.abort_in_flight("bench: the hold ends")
                result = await task
        thaw()
        wall = time.perf_counter() - start
        opened = client.connections_opened
    figures = monitor.figures(result.records)
    return {
        "streams": streams,
        "rate": rate,
        "open_at_once": open_now,
        "connections_opened": opened,
        "records": len(result.records),
        "send_lag_p50_ms": figures.send_lag_p50_ms,
        "send_lag_p99_ms": figures.send_lag_p99_ms,
        "send_lag_max_ms": figures.send_lag_max_ms,
        "loop_lag_p99_ms_all_open": (
            ticks_open[int(len(ticks_open) * 0.99)] if ticks_open else None
        ),
        "loop_lag_p99_ms": figures.loop_lag_p99_ms,
        "cpu_share": figures.cpu_share,
        "baseline_rss_mb": round(baseline, 1),
        "rss_mb_all_open": round(rss_open, 1),
        "wall_s": round(wall, 1),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--hold", type=float, default=10.0)
    parser.add_argument("--nginx-cpu", default="1")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bodies(root / "www", {"o64.sse": 64})
        nginx = Nginx(root, free_port(), args.nginx_cpu)
        nginx.start()
        try:
            url = f"http://127.0.0.1:{nginx.port}/slow/o64"
            print(json.dumps(asyncio.run(open_streams(url, args.streams, args.rate, args.hold))))
        finally:
            nginx.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
