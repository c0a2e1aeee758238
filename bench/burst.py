"""Answers that end together: golive's event-loop lag when a batch of answers completes in one
engine step (issue 33's stall), with each answer's parse-and-record run inline (as before) or
within the loop's turn budget (`traffic/loop_turns.py`, as a capacity window runs now).

    python bench/timing_server.py 18070 /tmp/ts.log --step-ms 40 &
    python bench/burst.py http://127.0.0.1:18070 --concurrency 256 --duration 10 --runs 3

Closed-loop lanes against the timing server's step mode: every request that arrived in one
step is answered at the step's close, so the lanes wake in batches, as they do against a GPU
engine. Prints one JSON object per run and mode (alternating), the loop lag as
`golive.client_headroom` measures it (a 10 ms tick's lateness).

The budget is the running loop's one `loop_turns()`, which the lanes also build their next
bodies within (`traffic/schedule.py`, since 2026-12-06): in `inline` mode only the answers'
work runs outside it. `--agent-bodies` sends capacity's own request bodies (`AgentWorkload`:
a shared system prompt, tools, a long input one request in five) instead of small ones.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from golive.bundle.store import Bundle
from golive.checks.context import CheckContext
from golive.config import GoliveConfig
from golive.evidence.sampling import running_beside
from golive.profiles import load_profile
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import ClientMonitor, collector_paused, thaw
from golive.traffic.loop_turns import loop_turns
from golive.traffic.records import RequestRecord
from golive.traffic.schedule import Schedule, run_schedule
from golive.traffic.workload import AgentWorkload, WorkloadShape


def _body(n: int, tokens: int) -> dict[str, Any]:
    text = f"request {n}: " + "hello " * 48
    return {
        "model": "bench-model",
        "messages": [{"role": "user", "content": text}],
        "stream": True,
        "max_tokens": tokens,
    }


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _agent_bodies(tokens: int) -> Any:
    """Capacity's own bodies (`AgentWorkload`: a shared system prompt, tools, a long input in
    five), as a `golive capacity` window sends them."""
    return AgentWorkload(WorkloadShape(max_tokens=tokens, seed=7), "bench-model").body


async def burst(
    url: str, concurrency: int, duration: float, tokens: int, mode: str, agent: bool = False
) -> Any:
    settings = ClientSettings(url, max_connections=concurrency)
    turns = loop_turns()  # the running loop's, shared with the lanes' bodies as in capacity
    deferred0 = turns.deferred
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Bundle.create(Path(tmp) / "bundle")
        async with TargetClient(settings) as client:
            ctx = CheckContext(client, bundle, GoliveConfig(), load_profile("generic"))
            sample = ctx.body_sample()

            async def send(body: Mapping[str, Any], label: str, due: int) -> RequestRecord:
                record = await client.chat(body, label, due)
                save = functools.partial(ctx.save, record, "capacity-burst", sample)
                if mode == "turns":
                    await turns.run(save)
                else:
                    save()
                return record

            warm = Schedule("concurrency", 1.0, 10**7, concurrency=concurrency, drain_s=5)
            make = _agent_bodies(tokens) if agent else functools.partial(_body, tokens=tokens)
            await run_schedule(warm, send, make, "warm")
            monitor = ClientMonitor()
            cpu0 = _cpu_s()
            load = Schedule("concurrency", duration, 10**8, concurrency=concurrency, drain_s=5)
            with collector_paused():  # as a capacity window runs
                async with running_beside(monitor.watch()):
                    result = await run_schedule(load, send, make, "burst")
            thaw()
            cpu = _cpu_s() - cpu0
        bundle.close()
    figures = monitor.figures(result.records)
    return {
        "mode": mode,
        "concurrency": concurrency,
        "requests": len(result.records),
        "rps": round(len(result.records) / result.wall_s, 1),
        "cpu_us_per_request": round(cpu / max(len(result.records), 1) * 1e6, 1),
        "loop_lag_p99_ms": figures.loop_lag_p99_ms,
        "loop_lag_max_ms": figures.loop_lag_max_ms,
        "send_lag_p99_ms": figures.send_lag_p99_ms,
        "deferred": turns.deferred - deferred0,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="inline,turns")
    parser.add_argument("--agent-bodies", action="store_true", help="capacity's own bodies")
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        for mode in args.modes.split(","):
            run = burst(
                args.url, args.concurrency, args.duration, args.tokens, mode, args.agent_bodies
            )
            print(json.dumps(asyncio.run(run)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
