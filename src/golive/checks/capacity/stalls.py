"""Liveness by token progress (issue 20 §3): `/health` answers 200 while an engine is hung
(vLLM #51663, #39863). A load window where no request received a byte for `capacity.stall_s`
while requests were in flight is a stall — apart from slowness (something still flows) and
from death (`/health` stops answering, or the process is gone). A stall is a software fault,
never a capacity limit: the verdict is `hold`, named.

`stall_in` is pure (each attempt's flight and the health probes in); `HealthWatch` polls
`/health` during a window (run beside it with `golive.evidence.sampling.running_beside`).
A flight is read on the wall clock from what a saved record line holds (its start and the
milliseconds since it: each streamed chunk, the end), built alike from the live record
(`flight`) and its saved line (`saved_flight`), so `golive decide` finds the same silence
in the records (`stall_evidence.stall_differences`) whatever the step's row says.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from golive.bundle.request_line import RequestRecordLine
from golive.checks.context import Target
from golive.traffic.records import RequestRecord

HEALTH_EVERY_S = 1.0
HELD_SHARE = 0.9  # requests in flight for at least this share of a silence
# A silence is a stall only when it is also this many times the silence a typical answer
# had at idle (the calibration window: the median of each answer's longest silence): a long
# prompt's prefill sends no byte either, and on a slow engine it alone can outlast
# `capacity.stall_s` (a 2-core CPU runner: 12.5 s to the first byte at concurrency 1, 24 s at
# concurrency 2, read as a "hung engine" on CI). The median, so that one slow or frozen
# answer at idle cannot raise the bar; and never past STALL_CAP_FACTOR x `stall_s`, so a hung
# engine is still named in a window of ordinary length.
IDLE_SILENCE_FACTOR = 3.0
STALL_CAP_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class Probe:
    at: float  # wall clock (s), the flights' clock
    ok: bool  # /health answered 200


@dataclass(frozen=True, slots=True)
class Flight:
    """One attempt on the wall clock (s): sent, each streamed chunk, its end (None: none)."""

    sent: float
    chunks: tuple[float, ...]
    end: float | None
    ok: bool  # a 2xx answer, no transport failure
    failed: bool  # a failure was recorded (given up on)


def flight(record: RequestRecord) -> Flight:
    """A live record's flight, as its saved line will give it (`saved_flight`)."""
    t = record.timings
    # the figures `ParsedResponse.saved_line` saves: chunks only for a streamed answer
    chunks = [ms for c in t.chunk_ns if (ms := t.ms_since_sent(c)) is not None]
    chunks = chunks if record.stream else []
    end = t.ms_since_sent(t.end_ns)
    return _flight(record.started_at, chunks, end, record.ok, record.failure is not None)


def saved_flight(line: RequestRecordLine) -> Flight:
    """A saved record line's flight."""
    timings = line.timings_ms
    return _flight(line.started_at, timings.chunks, timings.end, line.ok, line.failure is not None)


def _flight(
    started: float, chunks_ms: Sequence[float], end_ms: float | None, ok: bool, failed: bool
) -> Flight:
    return Flight(
        started,
        tuple(started + ms / 1000 for ms in chunks_ms),
        None if end_ms is None else started + end_ms / 1000,
        ok,
        failed,
    )


class HealthWatch:
    """`async with running_beside(health.poll()):` polls `/health` every second until the
    block ends."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.probes: list[Probe] = []

    async def poll(self) -> None:
        while True:
            at = time.time()
            record = await self.target.get("/health", "capacity-liveness")
            self.probes.append(Probe(at, record.ok))
            await asyncio.sleep(HEALTH_EVERY_S)


def _progress(flights: Sequence[Flight]) -> list[float]:
    """Moments the engine produced something: each chunk of an answer, a completed answer.
    Response headers are not progress: vLLM's API server sends `200` and the SSE headers
    before the engine has produced anything (a hung engine's requests all get them)."""
    stamps: list[float] = []
    for f in flights:
        stamps += f.chunks
        if f.ok and f.end is not None:
            stamps.append(f.end)
    return sorted(stamps)


def idle_silence_s(flights: Sequence[Flight]) -> float:
    """How long a typical answered request went without a byte: each answer's longest gap
    (send to first chunk, chunk to chunk, last chunk to end), their median (0.0: none)."""
    gaps: list[float] = []
    for f in flights:
        if not f.ok or f.end is None:
            continue
        moments = [f.sent, *f.chunks, f.end]
        gaps.append(max(b - a for a, b in itertools.pairwise(moments)))
    return statistics.median(gaps) if gaps else 0.0


def stall_after_s(stall_s: float, idle_s: float) -> float:
    """The silence that is a stall: `capacity.stall_s`, or longer where a typical answer at
    idle was nearly that silent, up to STALL_CAP_FACTOR x `stall_s`."""
    return min(max(stall_s, IDLE_SILENCE_FACTOR * idle_s), STALL_CAP_FACTOR * stall_s)


def _held(flights: Sequence[Flight], a: float, b: float, need: int, last: float) -> float:
    """The share of [a, b] during which at least `need` requests were in flight."""
    edges: list[tuple[float, int]] = []
    for f in flights:
        end = f.end if f.end is not None else last
        if f.sent < b and end > a:
            edges += [(max(f.sent, a), 1), (min(end, b), -1)]
    edges.sort()
    held, level, since = 0.0, 0, a
    for at, step in edges:
        if level >= need:
            held += at - since
        level, since = level + step, at
    if level >= need:
        held += b - since
    return held / (b - a)


def silence(
    flights: Sequence[Flight], stall_s: float, concurrency: int
) -> tuple[float, float] | None:
    """The window's longest silence that is a stall, as (from, to) on the wall clock; None.

    A silence is a gap of at least `stall_s` between two moments of server progress (or from
    the window's first send, or to its last give-up) during which min(2, concurrency)
    requests were in flight nearly all the time (the same ones, or the ones that replaced
    those that timed out): everyone waited and nothing came."""
    if not flights:
        return None
    start = min(f.sent for f in flights)
    end = max(f.end if f.end is not None else f.sent for f in flights)
    moments = [start, *_progress(flights), end]
    need = min(2, concurrency)
    worst: tuple[float, float] | None = None
    for a, b in itertools.pairwise(moments):
        if b - a < stall_s or (worst is not None and b - a <= worst[1] - worst[0]):
            continue
        if _held(flights, a, b, need, end) >= HELD_SHARE:
            worst = (a, b)
    return worst


def stall_headline(a: float, b: float, concurrency: int) -> str:
    """How a stall's finding begins (its length and load): what decide holds a row to."""
    return (
        f"engine stalled: no byte of any answer for {b - a:.1f} s with requests in flight at "
        f"concurrency {concurrency}"
    )


def stall_in(
    flights: Sequence[Flight],
    probes: Sequence[Probe],
    stall_s: float,
    concurrency: int,
) -> str | None:
    """The longest silence of the window if it is a stall (`silence`), described; else None."""
    found = silence(flights, stall_s, concurrency)
    if found is None:
        return None
    a, b = found
    gave_up = sum(1 for f in flights if f.failed and f.end is not None and a <= f.end <= b)
    during = [p for p in probes if a <= p.at <= b]
    healthy = sum(p.ok for p in during)
    if not during:
        health = "/health was not probed during it"
    elif healthy == len(during):
        health = f"while /health answered 200 ({healthy} of {len(during)} probes)"
    else:
        health = f"/health failed {len(during) - healthy} of {len(during)} probes during it"
    return (
        f"{stall_headline(a, b, concurrency)} ({gave_up} given up on meanwhile), {health} — "
        "a hung engine, not slowness or capacity (a load balancer trusting /health keeps "
        "routing to it)"
    )
