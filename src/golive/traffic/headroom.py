"""Proof that the client was not the bottleneck (issue 19 §4).

Around every load window golive measures itself: the send lag of each request against its
scheduled moment, the event loop's lag (a ticker that should wake every 10 ms), and the CPU
share of its own process. A window where golive was short of CPU measured golive, not the
server: it is not judged. The figures go into each window's watchdog row and into the check
`golive.client_headroom`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from golive.bundle.layout import CAPACITY_WATCHDOG
from golive.results import INTEGRITY_RESULT, CheckResult, Status
from golive.traffic.records import NS_PER_MS, RequestRecord

TICK_S = 0.01
_N = TypeVar("_N", float, int)
CHECK_ID = "golive.client_headroom"
LATENCY_SHARE = 0.02  # a lag under 2% of the window's median latency cannot move a judgement
LOOP_SHARE, LOOP_FACTOR = 0.25, 4.0  # the event loop's p99 lag: see loop_limit_ms


@dataclass(frozen=True, slots=True)
class ClientFigures:
    """golive's own figures over one load window; None where nothing was measured."""

    send_lag_p50_ms: float | None
    send_lag_p99_ms: float | None
    send_lag_max_ms: float | None
    loop_lag_p99_ms: float | None
    loop_lag_max_ms: float | None
    cpu_share: float | None  # process CPU seconds per wall second (1.0 = one core)
    requests: int
    ticks: int
    send_lag_mean_ms: float | None = None  # the share of each slot's time lost before sending
    niceness: int | None = None  # the event loop's thread's (Ray starts its workers at 15)

    def to_json(self) -> dict[str, Any]:
        return to_microseconds(asdict(self))


def to_microseconds(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of figures as the bundle keeps them: floats (milliseconds, shares) to 3 places."""
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}


@dataclass(frozen=True, slots=True)
class HeadroomPolicy:
    max_lag_ms: float = 5.0
    max_cpu_share: float = 0.8


class ClientMonitor:
    """`async with running_beside(monitor.watch()):` around a load window; then
    `figures(records)`."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._cpu_s = self._wall_s = 0.0
        self._niceness: int | None = None

    async def watch(self) -> None:
        """Tick every 10 ms until cancelled, keeping each tick's lateness; the process's CPU
        and the wall time are taken when the watch ends."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with contextlib.suppress(OSError):  # Linux keeps one per thread: this loop's
            self._niceness = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        try:
            while True:
                start = time.perf_counter()
                await asyncio.sleep(TICK_S)
                self.lags_ms.append(max(0.0, (time.perf_counter() - start - TICK_S) * 1000))
        finally:
            self._cpu_s = time.process_time() - cpu0
            self._wall_s = time.perf_counter() - wall0

    def figures(self, records: Iterable[RequestRecord]) -> ClientFigures:
        sends = sorted((r.timings.sent_ns - r.timings.scheduled_ns) / NS_PER_MS for r in records)
        loop = sorted(self.lags_ms)
        return ClientFigures(
            send_lag_p50_ms=_rank(sends, 50),
            send_lag_p99_ms=_rank(sends, 99),
            send_lag_max_ms=sends[-1] if sends else None,
            loop_lag_p99_ms=_rank(loop, 99),
            loop_lag_max_ms=loop[-1] if loop else None,
            cpu_share=self._cpu_s / self._wall_s if self._wall_s > 0 else None,
            requests=len(sends),
            ticks=len(loop),
            send_lag_mean_ms=sum(sends) / len(sends) if sends else None,
            niceness=self._niceness,
        )


def worst(figures: Sequence[ClientFigures]) -> ClientFigures:
    """Several clients' figures for one window as one row: the worst of each figure."""

    def most(values: Iterable[_N | None]) -> _N | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return ClientFigures(
        most(f.send_lag_p50_ms for f in figures),
        most(f.send_lag_p99_ms for f in figures),
        most(f.send_lag_max_ms for f in figures),
        most(f.loop_lag_p99_ms for f in figures),
        most(f.loop_lag_max_ms for f in figures),
        most(f.cpu_share for f in figures),
        sum(f.requests for f in figures),
        sum(f.ticks for f in figures),
        most(f.send_lag_mean_ms for f in figures),
        most(f.niceness for f in figures),
    )


def _rank(ordered: Sequence[float], q: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def lag_limit_ms(policy: HeadroomPolicy, e2e_p50_s: float | None) -> float:
    """The mean send lag a window tolerates: the policy's, or 2% of its median latency if
    larger (10 ms of client lag cannot move a judgement of 4-second requests). The mean, not
    the p99: one request held 13 ms by the operating system on a busy 2-core box is the p99
    of a 6-second window at 2 requests/s, and it cost the window under 1% of its load."""
    relative = (e2e_p50_s or 0.0) * 1000 * LATENCY_SHARE
    return max(policy.max_lag_ms, relative)


def loop_limit_ms(policy: HeadroomPolicy, e2e_p50_s: float | None) -> float:
    """The event-loop lag a window tolerates. A late tick delays the timestamps of whatever
    arrived meanwhile, for the ~1% of moments at the p99: it moves the medians and ratios the
    ramp judges only when it is a large share of the latency — four times the send-lag
    limit, or a quarter of the median latency if larger. Measured: the H200 at 80 requests/s,
    p99 11.5 ms against a 146 ms median, sends on time; the CPU target on a busy 2-core box,
    25 ms against 410 ms — neither golive's bottleneck; golive starved by busy threads in its
    own process, 100-330 ms against 250 ms — golive's."""
    relative = (e2e_p50_s or 0.0) * 1000 * LOOP_SHARE
    return max(LOOP_FACTOR * policy.max_lag_ms, relative)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic-garbage-collector pause inside a load window. What is alive before it is
    frozen (never scanned again; refcounting still frees it) and the collector is off until
    the window ends. Measured: one full collection with 15,000 parsed records alive took
    475 ms, a pause that would stamp every answer in flight late."""
    gc.freeze()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def thaw() -> None:
    """After the load windows: what `collector_paused` froze is collectable again."""
    gc.unfreeze()


def bottleneck(
    figures: ClientFigures,
    policy: HeadroomPolicy,
    e2e_p50_s: float | None,
    client: str | None = None,
) -> str | None:
    """Why the client, not the server, limited this window (None: it had headroom); `client`
    names which of several it was."""
    who = "the client" if client is None else f"the client ({client})"
    remedy = "add workers or clients"
    if figures.niceness is not None and figures.niceness > 0:  # it yielded to its machine
        remedy = (
            f"it ran at niceness {figures.niceness}, yielding the CPU to everything else on "
            "its machine (Ray starts workers at 15: set RAY_worker_niceness=0 on the load "
            "cluster or run its workers as root); " + remedy
        )
    if figures.cpu_share is not None and figures.cpu_share > policy.max_cpu_share:
        return (
            f"{who}, not the server, was the bottleneck: golive used "
            f"{figures.cpu_share:.0%} of a core (limit {policy.max_cpu_share:.0%}); {remedy}"
        )
    tail = loop_limit_ms(policy, e2e_p50_s)
    for name, value, limit in (
        # the mean is the load not offered: each slot idles that long before each request
        ("send lag mean", figures.send_lag_mean_ms, lag_limit_ms(policy, e2e_p50_s)),
        # the tail is a few requests sent late: it matters only as a large share of latency
        ("send lag p99", figures.send_lag_p99_ms, tail),
        ("event-loop lag p99", figures.loop_lag_p99_ms, tail),
    ):
        if value is not None and value > limit:
            return (
                f"{who}, not the server, was the bottleneck: its {name} was "
                f"{value:.1f} ms (limit {limit:.1f} ms); {remedy}"
            )
    return None


def headroom_check(windows: Sequence[Mapping[str, Any]]) -> CheckResult:
    """`golive.client_headroom` from the windows' watchdog rows (each with `client` figures
    and `client_bottleneck`)."""
    measured = [w for w in windows if isinstance(w.get("client"), Mapping)]
    evidence = (CAPACITY_WATCHDOG,)
    if not measured:
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.NO_DATA,
            "no load window measured golive's own send lag, loop lag and CPU",
            evidence=evidence,
        )
    worst = {
        key: max(
            (w["client"][key] for w in measured if w["client"].get(key) is not None), default=None
        )
        for key in ("send_lag_mean_ms", "send_lag_p99_ms", "loop_lag_p99_ms", "cpu_share")
    }
    short = [w for w in measured if w.get("client_bottleneck")]
    measurements: dict[str, Any] = {"windows": len(measured), "bottlenecked": len(short), **worst}
    if short:
        first = short[0]
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.FAIL,
            f"{len(short)} of {len(measured)} load window(s) were limited by golive itself "
            f"(first: {first.get('phase')} at concurrency {first.get('concurrency_cap')}: "
            f"{first['client_bottleneck']}); those windows are not judged",
            measurements,
            evidence=evidence,
        )
    return INTEGRITY_RESULT(
        CHECK_ID,
        Status.PASS,
        f"golive had headroom in every load window ({len(measured)}): send lag mean at most "
        f"{_ms(worst['send_lag_mean_ms'])} and p99 at most {_ms(worst['send_lag_p99_ms'])}, "
        "event-loop lag p99 at most "
        f"{_ms(worst['loop_lag_p99_ms'])}, CPU at most {_share(worst['cpu_share'])} of a core",
        measurements,
        evidence=evidence,
    )


def _ms(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def _share(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0%}"
