"""Liveness by token progress (issue 20 §3): `/health` answers 200 while an engine is hung
(vLLM #51663, #39863). A load window where no request received a byte for `capacity.stall_s`
while requests were in flight is a stall — apart from slowness (something still flows) and
from death (`/health` stops answering, or the process is gone). A stall is a software fault,
never a capacity limit: the verdict is `hold`, named.

`stall_in` is pure (records and health probes in); `HealthWatch` polls `/health` during a
window (run beside it with `golive.evidence.sampling.running_beside`).
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from golive.checks.context import Target
from golive.traffic.records import RequestRecord

NS = 1_000_000_000
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
    at_ns: int  # perf_counter_ns, the clock of the request records
    ok: bool  # /health answered 200


class HealthWatch:
    """`async with running_beside(health.poll()):` polls `/health` every second until the
    block ends."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.probes: list[Probe] = []

    async def poll(self) -> None:
        while True:
            at = time.perf_counter_ns()
            record = await self.target.get("/health", "capacity-liveness")
            self.probes.append(Probe(at, record.ok))
            await asyncio.sleep(HEALTH_EVERY_S)


def _progress(records: Sequence[RequestRecord]) -> list[int]:
    """Moments the engine produced something: each chunk of an answer, a completed answer.
    Response headers are not progress: vLLM's API server sends `200` and the SSE headers
    before the engine has produced anything (a hung engine's requests all get them)."""
    stamps: list[int] = []
    for record in records:
        t = record.timings
        stamps += list(t.chunk_ns)
        if record.ok and t.end_ns is not None:
            stamps.append(t.end_ns)
    return sorted(stamps)


def idle_silence_s(records: Sequence[RequestRecord]) -> float:
    """How long a typical answered request went without a byte: each answer's longest gap
    (send to first chunk, chunk to chunk, last chunk to end), their median (0.0: none)."""
    gaps: list[int] = []
    for record in records:
        t = record.timings
        if not record.ok or t.end_ns is None:
            continue
        moments = [t.sent_ns, *t.chunk_ns, t.end_ns]
        gaps.append(max(b - a for a, b in itertools.pairwise(moments)))
    return statistics.median(gaps) / NS if gaps else 0.0


def stall_after_s(stall_s: float, idle_s: float) -> float:
    """The silence that is a stall: `capacity.stall_s`, or longer where a typical answer at
    idle was nearly that silent, up to STALL_CAP_FACTOR x `stall_s`."""
    return min(max(stall_s, IDLE_SILENCE_FACTOR * idle_s), STALL_CAP_FACTOR * stall_s)


def _held(records: Sequence[RequestRecord], a: int, b: int, need: int, last: int) -> float:
    """The share of [a, b] during which at least `need` requests were in flight."""
    edges: list[tuple[int, int]] = []
    for r in records:
        sent, end = r.timings.sent_ns, r.timings.end_ns or last
        if sent < b and end > a:
            edges += [(max(sent, a), 1), (min(end, b), -1)]
    edges.sort()
    held, level, since = 0, 0, a
    for at, step in edges:
        if level >= need:
            held += at - since
        level, since = level + step, at
    if level >= need:
        held += b - since
    return held / (b - a)


def stall_in(
    records: Sequence[RequestRecord],
    probes: Sequence[Probe],
    stall_s: float,
    concurrency: int,
) -> str | None:
    """The longest silence of the window if it is a stall, described; else None.

    A silence is a gap of at least `stall_s` between two moments of server progress (or from
    the window's first send, or to its last give-up) during which min(2, concurrency)
    requests were in flight nearly all the time (the same ones, or the ones that replaced
    those that timed out): everyone waited and nothing came."""
    if not records:
        return None
    start = min(r.timings.sent_ns for r in records)
    end = max(r.timings.end_ns or r.timings.sent_ns for r in records)
    moments = [start, *_progress(records), end]
    need = min(2, concurrency)
    worst: tuple[int, int] | None = None
    for a, b in itertools.pairwise(moments):
        if b - a < stall_s * NS or (worst is not None and b - a <= worst[1] - worst[0]):
            continue
        if _held(records, a, b, need, end) >= HELD_SHARE:
            worst = (a, b)
    if worst is None:
        return None
    a, b = worst
    gave_up = sum(1 for r in records if r.failure is not None and a <= (r.timings.end_ns or 0) <= b)
    during = [p for p in probes if a <= p.at_ns <= b]
    healthy = sum(p.ok for p in during)
    if not during:
        health = "/health was not probed during it"
    elif healthy == len(during):
        health = f"while /health answered 200 ({healthy} of {len(during)} probes)"
    else:
        health = f"/health failed {len(during) - healthy} of {len(during)} probes during it"
    return (
        f"engine stalled: no byte of any answer for {(b - a) / NS:.1f} s with requests in "
        f"flight at concurrency {concurrency} ({gave_up} given up on meanwhile), {health} — "
        "a hung engine, not slowness or capacity (a load balancer trusting /health keeps "
        "routing to it)"
    )
