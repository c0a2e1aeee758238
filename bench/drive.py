"""golive's side of the benchmark: its own traffic engine (`TargetClient` + `run_schedule`),
driven exactly as the load phases drive it, one measure per call; prints one JSON object.

    python drive.py max_rps  URL --concurrency 64 --duration 10   (end to end)
    python drive.py max_rps_workers URL --concurrency 64 --duration 10 --workers 2
    python drive.py max_rps_send_only URL --concurrency 64 --duration 10
    python drive.py rate     URL --rate 500 --duration 5
    python drive.py timing   URL --concurrency 8 --requests 200
    python drive.py streams  URL --streams 1000 --hold 15
    python drive.py long     URL_LONG URL_SHORT --prompt-tokens 200000

max_rps parses and records every answer as it arrives, as a capacity window does (the cyclic
garbage collector paused, as in every capacity window); the other measures parse after the
load. An answer counts only when it is a complete stream with the
expected number of token events.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from golive.bundle.store import Bundle
from golive.checks.context import CheckContext, body_sample
from golive.config import GoliveConfig
from golive.profiles import load_profile
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import collector_paused
from golive.traffic.process_load import ProcessLoad
from golive.traffic.records import ParsedResponse, RequestRecord, parse
from golive.traffic.schedule import LoadResult, Schedule, run_schedule


def _body(tokens: int, prompt_words: int = 48, n: int | None = None) -> dict[str, Any]:
    """A chat body; with `n`, a fresh one of its own (as a workload builds each request)."""
    text = "hello " * prompt_words if n is None else f"request {n}: " + "hello " * prompt_words
    return {
        "model": "bench-model",
        "messages": [{"role": "user", "content": text}],
        "stream": True,
        "max_tokens": tokens,
    }


def _complete(parsed: ParsedResponse, tokens: int) -> bool:
    """A complete stream with the expected number of token events, and no problem."""
    stream = parsed.stream
    return (
        parsed.record.ok
        and not parsed.problems
        and stream is not None
        and stream.done
        and len(stream.token_chunks) == tokens
    )


def _valid(record: RequestRecord, tokens: int) -> bool:
    return _complete(parse(record), tokens)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def max_rps(url: str, concurrency: int, duration: float, tokens: int) -> dict[str, Any]:
    """End to end, as a capacity window runs: a fresh body per request, and every answer
    parsed (SSE framing, each event's JSON, reassembly), checked and written to a bundle's
    record stream (full bodies sampled as `records` sets them) as it arrives."""
    settings = ClientSettings(url, max_connections=concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Bundle.create(Path(tmp) / "bundle")
        valid = 0
        async with TargetClient(settings) as client:
            # the run's own record path: parse, sample the bodies as `records` sets, append
            ctx = CheckContext(client, bundle, GoliveConfig(), load_profile("generic"))
            sample = ctx.body_sample()

            async def send(body: Mapping[str, Any], label: str, due: int) -> RequestRecord:
                nonlocal valid
                record = await client.chat(body, label, due)
                valid += _complete(ctx.save(record, "capacity-max", sample), tokens)
                return record

            warm = Schedule("concurrency", 1.0, 10**7, concurrency=concurrency, drain_s=5)
            await run_schedule(warm, send, lambda n: _body(tokens, n=n), "warm")
            valid = 0
            cpu0 = _cpu_s()
            load = Schedule("concurrency", duration, 10**8, concurrency=concurrency, drain_s=5)
            with collector_paused():  # as a capacity window runs (`load_window`)
                result = await run_schedule(load, send, lambda n: _body(tokens, n=n), "max")
            cpu = _cpu_s() - cpu0
            opened = client.connections_opened
        bundle.close()
    return {**_window(result, valid, cpu), "connections_opened": opened, "rss_mb": rss_mb()}


async def max_rps_send_only(
    url: str, concurrency: int, duration: float, tokens: int
) -> dict[str, Any]:
    """The engine alone: one body object sent every time, every answer parsed only after the
    load (the figure golive used to quote; kept as the cost of sending)."""
    settings = ClientSettings(url, max_connections=concurrency)
    body = _body(tokens)
    async with TargetClient(settings) as client:
        warm = Schedule("concurrency", 1.0, 10**7, concurrency=concurrency, drain_s=5)
        await run_schedule(warm, lambda b, lab, s: client.chat(b, lab, s), lambda n: body, "warm")
        cpu0 = _cpu_s()
        load = Schedule("concurrency", duration, 10**8, concurrency=concurrency, drain_s=5)
        with collector_paused():  # as a capacity window runs
            result = await run_schedule(
                load, lambda b, lab, s: client.chat(b, lab, s), lambda n: body, "max"
            )
        cpu = _cpu_s() - cpu0
    return _window(result, sum(_valid(r, tokens) for r in result.records), cpu)


class _Recorded:
    """The capacity run's sink for worker processes: each worker's parsed answer and its
    bundle line, appended as it arrives (what `CapacityRun.received_parsed` does)."""

    stream_file = "capacity-max"

    def __init__(self, bundle: Bundle, tokens: int) -> None:
        self.bundle = bundle
        self.tokens = tokens
        self.valid = 0

    def received_parsed(self, batch: Sequence[tuple[ParsedResponse, str]]) -> None:
        lines = "".join(line for _, line in batch)
        self.bundle.append_text(f"requests/{self.stream_file}.jsonl", lines)
        self.valid += sum(_complete(parsed, self.tokens) for parsed, _ in batch)


async def max_rps_workers(
    url: str, concurrency: int, duration: float, tokens: int, workers: int
) -> dict[str, Any]:
    """`max_rps` with the engine in `workers` processes (`--workers`): each worker sends,
    parses and renders its answers' bundle lines; this process appends them to the bundle.
    CPU is every process's: the workers' own figures plus this one's."""
    settings = ClientSettings(url, max_connections=concurrency)
    make = functools.partial(_body, tokens, 48)  # a fresh body per request, picklable
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Bundle.create(Path(tmp) / "bundle")
        sink = _Recorded(bundle, tokens)
        load = ProcessLoad(settings, workers, body_sample(GoliveConfig()))
        try:
            warm = Schedule("concurrency", 1.0, 10**7, concurrency=concurrency, drain_s=5)
            await load.run(warm, make, "warm", sink, "warm")
            sink.valid = 0
            seen = len(load.windows)
            cpu0 = _cpu_s()
            window = Schedule("concurrency", duration, 10**8, concurrency=concurrency, drain_s=5)
            result = await load.run(window, make, "max", sink, "max")
            main_cpu = _cpu_s() - cpu0
        finally:
            load.close()
        bundle.close()
    mine = [w for w in load.windows[seen:] if w.client != "main"]
    worker_cpu = sum((w.cpu_share or 0.0) * (w.wall_s or 0.0) for w in mine)
    figures = _window(result, sink.valid, main_cpu + worker_cpu)
    return {**figures, "workers": workers, "main_cpu_s": main_cpu, "worker_cpu_s": worker_cpu}


def _window(result: LoadResult, valid: int, cpu_s: float) -> dict[str, Any]:
    """A max_rps window's figures: valid answers per second, golive's CPU per request."""
    return {
        "requests": len(result.records),
        "valid": valid,
        "wall_s": result.wall_s,
        "rps": valid / result.wall_s,
        "cpu_s": cpu_s,
        "cpu_us_per_request": cpu_s / max(len(result.records), 1) * 1e6,
    }


async def rate(url: str, per_s: float, duration: float, tokens: int) -> dict[str, Any]:
    body = _body(tokens)
    async with TargetClient(ClientSettings(url, max_connections=512)) as client:
        warm = Schedule("rate", 1.0, int(per_s), rate_per_s=per_s, arrival="constant")
        await run_schedule(warm, lambda b, lab, s: client.chat(b, lab, s), lambda n: body, "warm")
        load = Schedule(
            "rate",
            duration,
            int(per_s * duration),
            rate_per_s=per_s,
            max_in_flight=512,
            arrival="constant",
            drain_s=5,
        )
        cpu0 = _cpu_s()
        with collector_paused():  # as a capacity window runs: no collector pause mid-window
            result = await run_schedule(
                load, lambda b, lab, s: client.chat(b, lab, s), lambda n: body, "rate"
            )
        cpu = _cpu_s() - cpu0
    return {
        "requests": len(result.records),
        "valid": sum(_valid(r, tokens) for r in result.records),
        "wall_s": result.wall_s,
        "cpu_share": cpu / result.wall_s,
        "sends": [
            [r.request_id, r.timings.scheduled_ns, r.timings.sent_ns] for r in result.records
        ],
    }


async def timing(url: str, concurrency: int, requests: int, tokens: int) -> dict[str, Any]:
    body = _body(tokens)
    async with TargetClient(ClientSettings(url, max_connections=concurrency)) as client:
        load = Schedule("concurrency", 600, requests, concurrency=concurrency)
        result = await run_schedule(
            load, lambda b, lab, s: client.chat(b, lab, s), lambda n: body, "timing"
        )
    out = []
    for record in result.records:
        parsed = parse(record)
        if parsed.stream is None:
            continue
        stamps = record.timings.chunk_ns
        tokens_ns = [stamps[i] for i in parsed.stream.token_chunks if i < len(stamps)]
        out.append([record.request_id, record.timings.sent_ns, tokens_ns])
    return {"requests": len(result.records), "streams": out}


async def streams(url: str, count: int, hold: float, tokens: int) -> dict[str, Any]:
    """Open `count` slow streams at once; RSS once every one of them is receiving."""
    baseline = rss_mb()
    body = _body(tokens)
    settings = ClientSettings(url, max_connections=count, read_timeout_s=120)
    async with TargetClient(settings) as client:
        tasks = [
            asyncio.ensure_future(client.chat(body, "open", time.perf_counter_ns()))
            for _ in range(count)
        ]
        await asyncio.sleep(hold)
        during = rss_mb()
        opened = client.connections_opened
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {"baseline_rss_mb": baseline, "rss_mb": during, "connections_opened": opened}


async def long_context(
    long_url: str, short_url: str, prompt_tokens: int, tokens: int
) -> dict[str, Any]:
    """One huge request body and one long streamed answer, against short ones."""
    results: dict[str, Any] = {}
    long_body = _body(tokens, prompt_words=prompt_tokens)  # "hello " is one token per word
    short_body = _body(64)
    async with TargetClient(ClientSettings(long_url, max_connections=4)) as long_client:
        for _ in range(2):  # warm, then measured
            record = await long_client.chat(long_body, "long")
        results["long"] = _summary(record, tokens)
    async with TargetClient(ClientSettings(short_url, max_connections=4)) as short_client:
        records = [await short_client.chat(short_body, "short") for _ in range(50)]
        results["short"] = _summary(records[-1], 64)
        results["short"]["tokens_per_s"] = sum(
            64 / ((r.timings.end_ns or 0) - r.timings.sent_ns) * 1e9 for r in records[10:]
        ) / len(records[10:])
    return results


def _summary(record: RequestRecord, tokens: int) -> dict[str, Any]:
    end = record.timings.end_ns or record.timings.sent_ns
    seconds = (end - record.timings.sent_ns) / 1e9
    body_bytes = len(json.dumps(record.body)) if record.body else 0
    return {
        "valid": _valid(record, tokens),
        "request_bytes": body_bytes,
        "response_bytes": sum(map(len, record.chunks)),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if seconds else 0.0,
        "socket_reads": len(record.chunks),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "measure",
        choices=(
            "max_rps",
            "max_rps_workers",
            "max_rps_send_only",
            "rate",
            "timing",
            "streams",
            "long",
        ),
    )
    parser.add_argument("url")
    parser.add_argument("url2", nargs="?")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=15.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=200_000)
    args = parser.parse_args(argv)
    runs: Mapping[str, Any] = {
        "max_rps": lambda: max_rps(args.url, args.concurrency, args.duration, args.tokens),
        "max_rps_workers": lambda: max_rps_workers(
            args.url, args.concurrency, args.duration, args.tokens, args.workers
        ),
        "max_rps_send_only": lambda: max_rps_send_only(
            args.url, args.concurrency, args.duration, args.tokens
        ),
        "rate": lambda: rate(args.url, args.rate, args.duration, args.tokens),
        "timing": lambda: timing(args.url, args.concurrency, args.requests, args.tokens),
        "streams": lambda: streams(args.url, args.streams, args.hold, args.tokens),
        "long": lambda: long_context(args.url, args.url2, args.prompt_tokens, args.tokens),
    }
    print(json.dumps(asyncio.run(runs[args.measure]())))


if __name__ == "__main__":
    main(sys.argv[1:])
