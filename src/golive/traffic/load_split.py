"""One load window split over several clients: worker processes (`--workers`) or client
machines (`--ray`). Each client gets an even share of the concurrency (or rate and in-flight
cap) and of the request cap, its own seed, and every `count`-th request of the workload; each
reports how its share went as a `ClientWindow`. Pure: nothing here sends a request."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from golive.traffic.headroom import (
    ClientFigures,
    HeadroomPolicy,
    bottleneck,
    to_microseconds,
    worst,
)
from golive.traffic.records import RequestRecord
from golive.traffic.schedule import LoadResult, MakeBody, Schedule, StoppedBy


@dataclasses.dataclass(frozen=True, slots=True)
class ClientWindow:
    """How one client's share of a window went (per-client scheduling accuracy)."""

    client: str
    share: int  # this client's concurrency in the window
    requests: int
    sent: int
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    wall_s: float | None
    stopped_by: str | None
    lag_max_ms: float | None = None
    loop_lag_p99_ms: float | None = None  # the client's event loop (its own headroom)
    loop_lag_max_ms: float | None = None
    cpu_share: float | None = None  # the client process's CPU over the window (1.0 = a core)
    ticks: int = 0
    lag_mean_ms: float | None = None
    niceness: int | None = None  # its event loop's thread's scheduling niceness

    def to_json(self) -> dict[str, Any]:
        """The bundle's row (figures to the microsecond, as the window's own)."""
        return to_microseconds(dataclasses.asdict(self))

    def figures(self) -> ClientFigures:
        return ClientFigures(
            self.lag_p50_ms,
            self.lag_p99_ms,
            self.lag_max_ms,
            self.loop_lag_p99_ms,
            self.loop_lag_max_ms,
            self.cpu_share,
            self.requests,
            self.ticks,
            self.lag_mean_ms,
            self.niceness,
        )


def split(total: int, parts: int) -> list[int]:
    """`total` spread over at most `parts` clients as evenly as possible, no zero shares."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def shares(schedule: Schedule, clients: int) -> list[Schedule]:
    """Each client's share of one window; fewer shares than clients when the window's
    concurrency or request cap is smaller than the number of clients."""
    count = clients
    if schedule.mode == "concurrency":
        count = min(count, schedule.concurrency)
    count = min(count, schedule.max_requests)
    slots = split(schedule.concurrency, count) if schedule.mode == "concurrency" else []
    caps = split(schedule.max_requests, count)
    return [
        dataclasses.replace(
            schedule,
            concurrency=slots[i] if slots else schedule.concurrency,
            max_requests=caps[i],
            seed=schedule.seed + i,
            rate_per_s=schedule.rate_per_s / count,  # used by rate schedules only
            max_in_flight=max(1, schedule.max_in_flight // count),
        )
        for i in range(count)
    ]


_TELLING: tuple[StoppedBy, ...] = ("watchdog", "stop", "request_cap")


def stopped_by(stops: set[str]) -> StoppedBy:
    """The window's reason to stop from its clients': the most telling one."""
    return next((s for s in _TELLING if s in stops), "duration")


def closing(result: LoadResult, figures: ClientFigures) -> dict[str, Any]:
    """What a client reports when its share of a window ends: how it ended, and its own
    loop lag and CPU (its send lag is taken from the records it sent)."""
    return {
        "wall_s": result.wall_s,
        "stopped_by": result.stopped_by,
        "cancelled": result.cancelled,
        "peak_in_flight": result.peak_in_flight,
        "loop_lag_p99_ms": figures.loop_lag_p99_ms,
        "loop_lag_max_ms": figures.loop_lag_max_ms,
        "cpu_share": figures.cpu_share,
        "ticks": figures.ticks,
        "niceness": figures.niceness,
    }


def window_result(
    records: Sequence[RequestRecord], wall_s: float, ends: Sequence[Mapping[str, Any]]
) -> LoadResult:
    """The whole window from its clients' records and `closing` reports."""
    return LoadResult(
        tuple(records),
        wall_s,
        stopped_by({end["stopped_by"] for end in ends}),
        sum(end["cancelled"] for end in ends),
        sum(end["peak_in_flight"] for end in ends),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Interleaved:
    """Client `index` of `count` sends requests index, index + count, ... of the workload
    (a class, not a closure, so that it travels to a worker process)."""

    make_body: MakeBody
    index: int
    count: int

    def __call__(self, n: int) -> Mapping[str, Any]:
        return self.make_body(n * self.count + self.index)


@dataclasses.dataclass(frozen=True, slots=True)
class Offset:
    """The workload from request `offset` on (each window continues where the last ended)."""

    make_body: MakeBody
    offset: int

    def __call__(self, n: int) -> Mapping[str, Any]:
        return self.make_body(self.offset + n)


def client_window(
    name: str,
    concurrency: int,
    records: Sequence[RequestRecord],
    done: Mapping[str, Any] | None,
    sent: int,
) -> ClientWindow:
    """A client's `ClientWindow` from its records' send lag and its own closing figures."""
    lags = sorted((r.timings.sent_ns - r.timings.scheduled_ns) / 1e6 for r in records)
    return ClientWindow(
        client=name,
        share=concurrency,
        requests=len(records),
        sent=sent,
        lag_p50_ms=round(statistics.median(lags), 3) if lags else None,
        lag_p99_ms=round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 3) if lags else None,
        wall_s=None if done is None else round(done["wall_s"], 3),
        stopped_by=None if done is None else done["stopped_by"],
        lag_max_ms=round(lags[-1], 3) if lags else None,
        loop_lag_p99_ms=None if done is None else done.get("loop_lag_p99_ms"),
        loop_lag_max_ms=None if done is None else done.get("loop_lag_max_ms"),
        cpu_share=None if done is None else done.get("cpu_share"),
        ticks=0 if done is None else int(done.get("ticks") or 0),
        lag_mean_ms=round(statistics.fmean(lags), 3) if lags else None,
        niceness=None if done is None else done.get("niceness"),
    )


def main_window(
    main: ClientFigures, lane: Sequence[RequestRecord], lanes: int, wall_s: float
) -> ClientWindow:
    """golive's own process's row beside the load clients': its loop lag and CPU (it receives
    and writes every record), and the requests of the answer probes' lanes it kept (none
    when the window has no probes)."""
    return dataclasses.replace(
        client_window("main", lanes, lane, None, len(lane)),
        wall_s=round(wall_s, 3),
        loop_lag_p99_ms=main.loop_lag_p99_ms,
        loop_lag_max_ms=main.loop_lag_max_ms,
        cpu_share=main.cpu_share,
        ticks=main.ticks,
        niceness=main.niceness,
    )


def window_headroom(
    rows: Sequence[ClientWindow], policy: HeadroomPolicy, e2e_p50_s: float | None
) -> tuple[ClientFigures, str | None]:
    """A split window's figures for `golive.client_headroom` (the worst client's) and why a
    client limited it, naming the client (None: every one had headroom).

    Judged are the rows with a share of the window's slots. golive's own process with no
    lane of its own (no answer probes) sends nothing: it receives records the clients timed,
    so its loop lag and CPU, kept in its row for the reader, cannot move a timestamp the
    window is judged on. A worker it is too slow to read from blocks on its pipe and shows
    that in its own loop lag."""
    senders = [(w.client, w.figures()) for w in rows if w.share > 0]
    why = next(
        (b for name, f in senders if (b := bottleneck(f, policy, e2e_p50_s, name))),
        None,
    )
    return worst([f for _, f in senders]), why
