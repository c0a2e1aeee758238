"""Load from many client machines: golive's traffic engine inside Ray actors, one per node.

`golive capacity --ray ADDRESS` connects to a load-generating Ray cluster (separate from the
vLLM cluster; ADDRESS as `ray.init` takes it: `HEAD:6379`, `ray://HEAD:10001` or `auto`),
places one async actor on every alive node (NodeAffinitySchedulingStrategy), and splits
each load window's concurrency and request cap across them. Inside each actor the engine is
unchanged: its own `TargetClient` and `run_schedule`, watchdog included. Records stream back
to golive in batches as they complete (a streaming actor method) and are saved into the one
bundle as they arrive, labelled with their client; each batch carries the actor client's
count of requests sent, so the ledger compares what the clients sent with what the bundle
holds. Ray is optional (`golive[ray]`) and imported only through this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import socket
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import golive
from golive.errors import ConfigError
from golive.evidence.sampling import running_beside
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import ClientFigures, ClientMonitor
from golive.traffic.records import RequestRecord
from golive.traffic.schedule import LoadResult, MakeBody, Schedule, run_schedule

BATCH_S = 0.25


@ray.remote(num_cpus=0)
class LoadClient:
    """One client machine's share of a load window (an async actor)."""

    def __init__(self, name: str, settings: ClientSettings) -> None:
        self.name = name
        self.settings = settings
        self.client: TargetClient | None = None
        self.stopped: asyncio.Event | None = None
        self.single: TargetClient | None = None  # for one-at-a-time requests (`chat`)

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        deadline_s: float | None,
        headers: Mapping[str, str] | None,
    ) -> RequestRecord:
        """One request from this client machine (the Agent suite, smoke, cache)."""
        if self.single is None:
            self.single = await TargetClient(self.settings).__aenter__()
        return await self.single.chat(body, label, None, deadline_s, headers)

    def sent(self) -> int:
        """Chat requests this client's one-at-a-time connection pool has sent."""
        return 0 if self.single is None else self.single.chat_requests

    async def run(self, schedule: Schedule, make_body: MakeBody, label: str) -> AsyncIterator[Any]:
        records: asyncio.Queue[RequestRecord] = asyncio.Queue()
        self.stopped = asyncio.Event()
        monitor = ClientMonitor()  # this client's own loop lag and CPU (golive.client_headroom)
        async with TargetClient(self.settings) as client, running_beside(monitor.watch()):
            self.client = client
            task = asyncio.ensure_future(
                run_schedule(
                    schedule,
                    client.chat,
                    make_body,
                    label,
                    on_record=records.put_nowait,
                    stop=self.stopped,
                    abort=client.abort_in_flight,
                )
            )
            while not (task.done() and records.empty()):
                batch = []
                with contextlib.suppress(TimeoutError):
                    batch.append(await asyncio.wait_for(records.get(), BATCH_S))
                while not records.empty():
                    batch.append(records.get_nowait())
                if batch:
                    yield ("records", batch, client.chat_requests)
            result: LoadResult = task.result()
        figures = monitor.figures(())
        yield (
            "done",
            {
                "wall_s": result.wall_s,
                "stopped_by": result.stopped_by,
                "cancelled": result.cancelled,
                "peak_in_flight": result.peak_in_flight,
                "loop_lag_p99_ms": figures.loop_lag_p99_ms,
                "loop_lag_max_ms": figures.loop_lag_max_ms,
                "cpu_share": figures.cpu_share,
                "ticks": figures.ticks,
            },
            client.chat_requests,
        )

    def node(self) -> str:
        return socket.gethostname()

    async def stop(self, reason: str) -> int:
        if self.stopped is not None:
            self.stopped.set()
        aborted = 0 if self.single is None else self.single.abort_in_flight(reason)
        return aborted + (0 if self.client is None else self.client.abort_in_flight(reason))


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
        )


class RayLoad:
    """The actors of a load cluster; use one per golive run, then `close`."""

    def __init__(self, address: str, settings: ClientSettings) -> None:
        try:
            ray.init(
                address=address,
                namespace="golive",
                runtime_env={"py_modules": [str(Path(golive.__file__).parent)]},
                log_to_driver=False,
            )
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"--ray {address}: cannot connect to the load cluster ({exc}); give the "
                "address `ray.init` takes (HEAD:6379, ray://HEAD:10001 or auto)"
            ) from exc
        alive = (n for n in ray.nodes() if n.get("Alive"))  # type: ignore[no-untyped-call]
        nodes = sorted(alive, key=lambda n: n["NodeID"])
        self.actors = []
        self.names = []
        for i, node in enumerate(nodes):
            name = f"client-{i}-{node.get('NodeManagerHostname', 'node')}"
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            self.actors.append(
                LoadClient.options(scheduling_strategy=strategy).remote(name, settings)  # type: ignore[attr-defined]
            )
            self.names.append(name)
        self._sent: dict[str, int] = {}
        self.windows: list[ClientWindow] = []

    @property
    def chat_requests(self) -> int:
        """Chat requests the actors' clients reported sending (for the ledger)."""
        singles = ray.get([actor.sent.remote() for actor in self.actors], timeout=30)
        return sum(self._sent.values()) + sum(int(n) for n in singles)

    def target(self, local: TargetClient) -> RemoteTarget:
        """A `Target` whose chat requests leave from the client actors in turn; GETs (health,
        metrics, models) and other POSTs stay on `local`."""
        return RemoteTarget(local, self)

    def stop(self, reason: str) -> int:
        for actor in self.actors:
            actor.stop.remote(reason)
        return 0

    async def run(
        self,
        schedule: Schedule,
        make_body: MakeBody,
        label: str,
        on_record: Callable[[RequestRecord], None],
        key: str,
    ) -> LoadResult:
        """One load window split across the actors; records are handed to `on_record` as
        they arrive. `key` tells this window's counts apart from the earlier ones'."""
        started = time.perf_counter_ns()
        count = len(self.actors)
        if schedule.mode == "concurrency":
            count = min(count, schedule.concurrency)
        count = min(count, schedule.max_requests)
        shares = split(schedule.concurrency, count) if schedule.mode == "concurrency" else []
        caps = split(schedule.max_requests, count)
        records: list[RequestRecord] = []
        done: dict[str, dict[str, Any]] = {}

        async def one(i: int) -> None:
            name = self.names[i]
            share = dataclasses.replace(
                schedule,
                concurrency=shares[i] if shares else schedule.concurrency,
                max_requests=caps[i],
                seed=schedule.seed + i,
                rate_per_s=schedule.rate_per_s / count,  # used by rate schedules only
                max_in_flight=max(1, schedule.max_in_flight // count),
            )
            stream = (
                self.actors[i]
                .run.options(num_returns="streaming")
                .remote(share, _interleaved(make_body, i, count), f"{label}@{name}")
            )
            mine: list[RequestRecord] = []
            async for ref in stream:
                kind, payload, sent = await ref
                self._sent[f"{key}/{name}"] = sent
                if kind == "records":
                    for record in payload:
                        on_record(record)
                    mine += payload
                else:
                    done[name] = payload
            records.extend(mine)
            self.windows.append(_window(name, share.concurrency, mine, done.get(name), sent))

        await asyncio.gather(*(one(i) for i in range(count)))
        wall = (time.perf_counter_ns() - started) / 1e9
        stops = {d["stopped_by"] for d in done.values()}
        stopped_by = next(
            (s for s in ("watchdog", "stop", "request_cap") if s in stops), "duration"
        )
        return LoadResult(
            tuple(records),
            wall,
            stopped_by,  # type: ignore[arg-type]
            sum(d["cancelled"] for d in done.values()),
            sum(d["peak_in_flight"] for d in done.values()),
        )

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
        ray.shutdown()


class RemoteTarget:
    """The checks' `Target` seam, with chat requests sent from the client actors in turn."""

    def __init__(self, local: TargetClient, load: RayLoad) -> None:
        self.local = local
        self.load = load
        self._turn = itertools.count()

    def url(self, path: str) -> str:
        return self.local.url(path)

    def abort_in_flight(self, reason: str) -> int:
        for actor in self.load.actors:
            actor.stop.remote(reason)
        return self.local.abort_in_flight(reason)

    async def get(self, path: str, label: str) -> RequestRecord:
        return await self.local.get(path, label)

    async def post(self, path: str, body: Mapping[str, Any], label: str) -> RequestRecord:
        return await self.local.post(path, body, label)

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        actor = self.load.actors[next(self._turn) % len(self.load.actors)]
        record: RequestRecord = await actor.chat.remote(body, label, deadline_s, headers)
        return record


def split(total: int, parts: int) -> list[int]:
    """`total` spread over at most `parts` clients as evenly as possible, no zero shares."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _interleaved(make_body: MakeBody, index: int, count: int) -> MakeBody:
    """Client `index` of `count` sends requests index, index + count, ... of the workload."""
    return lambda n: make_body(n * count + index)


def _window(
    name: str,
    concurrency: int,
    records: list[RequestRecord],
    done: Mapping[str, Any] | None,
    sent: int,
) -> ClientWindow:
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
    )
