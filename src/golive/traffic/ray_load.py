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
import functools
import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import golive
from golive.errors import ConfigError
from golive.evidence.sampling import running_beside
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import ClientMonitor
from golive.traffic.load_split import (
    ClientWindow,
    Interleaved,
    client_window,
    closing,
    shares,
    window_result,
)
from golive.traffic.records import RequestRecord
from golive.traffic.retry import RetryPolicy, send_with_retries
from golive.traffic.schedule import LoadResult, MakeBody, Schedule, cancel_all, run_schedule

BATCH_S = 0.25


def normal_priority() -> None:
    """Ray starts its worker processes at niceness 15 (`RAY_worker_niceness`) so that they
    yield to the raylet. A load client that yields to everything else on its node measures
    that, not the server: three actors beside a CPU vLLM on a busy 2-core box sent at a mean
    37 ms late (limit 23 ms) and golive rightly judged the window its own. Every thread of
    this process goes back to 0 where it may (root, or CAP_SYS_NICE); where it may not, it
    stays, and the client's rows show the niceness it ran at."""
    tasks = Path("/proc/self/task")
    tids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [threading.get_native_id()]
    for tid in tids:
        with contextlib.suppress(OSError):
            if os.getpriority(os.PRIO_PROCESS, tid) > 0:
                os.setpriority(os.PRIO_PROCESS, tid, 0)


@ray.remote(num_cpus=0)
class LoadClient:
    """One client machine's share of a load window (an async actor)."""

    def __init__(self, name: str, settings: ClientSettings, retry: RetryPolicy) -> None:
        self.name = name
        self.settings = settings
        self.retry = retry  # the production client's policy, for the load windows
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
            normal_priority()  # on the event loop's thread, before this client's first request
            self.single = await TargetClient(self.settings).__aenter__()
        return await self.single.chat(body, label, None, deadline_s, headers)

    def sent(self) -> int:
        """Chat requests this client's one-at-a-time connection pool has sent."""
        return 0 if self.single is None else self.single.chat_requests

    async def run(self, schedule: Schedule, make_body: MakeBody, label: str) -> AsyncIterator[Any]:
        normal_priority()
        records: asyncio.Queue[RequestRecord] = asyncio.Queue()
        self.stopped = asyncio.Event()
        monitor = ClientMonitor()  # this client's own loop lag and CPU (golive.client_headroom)
        async with TargetClient(self.settings) as client, running_beside(monitor.watch()):
            self.client = client
            task = asyncio.ensure_future(
                run_schedule(
                    schedule,
                    functools.partial(
                        send_with_retries,
                        client.chat,
                        policy=self.retry,
                        retried=records.put_nowait,
                        closing=self.stopped,
                    ),
                    make_body,
                    label,
                    on_record=records.put_nowait,
                    stop=self.stopped,
                    abort=functools.partial(_end, self.stopped, client),
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
        yield ("done", closing(result, monitor.figures(())), client.chat_requests)

    def node(self) -> str:
        return socket.gethostname()

    async def stop(self, reason: str) -> int:
        if self.stopped is not None:
            self.stopped.set()
        aborted = 0 if self.single is None else self.single.abort_in_flight(reason)
        return aborted + (0 if self.client is None else self.client.abort_in_flight(reason))


def _end(stopped: asyncio.Event, client: TargetClient, reason: str) -> int:
    """A window's end: no more retries, and what is in flight is aborted."""
    stopped.set()
    return client.abort_in_flight(reason)


class RecordSink(Protocol):
    """Where a window's records go as they arrive (the capacity run's `CapacityRun`)."""

    def received(self, record: RequestRecord) -> None: ...


class RayLoad:
    """The actors of a load cluster; use one per golive run, then `close`."""

    def __init__(
        self, address: str, settings: ClientSettings, retry: RetryPolicy | None = None
    ) -> None:
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
                LoadClient.options(scheduling_strategy=strategy).remote(  # type: ignore[attr-defined]
                    name, settings, retry or RetryPolicy()
                )
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
        sink: RecordSink,
        key: str,
    ) -> LoadResult:
        """One load window split across the actors; records are handed to `sink.received`
        as they arrive. `key` tells this window's counts apart from the earlier ones'."""
        started = time.perf_counter_ns()
        parts = shares(schedule, len(self.actors))
        count = len(parts)
        records: list[RequestRecord] = []
        done: dict[str, dict[str, Any]] = {}

        async def one(i: int) -> None:
            name = self.names[i]
            share = parts[i]
            stream = (
                self.actors[i]
                .run.options(num_returns="streaming")
                .remote(share, Interleaved(make_body, i, count), f"{label}@{name}")
            )
            mine: list[RequestRecord] = []
            async for ref in stream:
                kind, payload, sent = await ref
                self._sent[f"{key}/{name}"] = sent
                if kind == "records":
                    for record in payload:
                        sink.received(record)
                    mine += payload
                else:
                    done[name] = payload
            records.extend(mine)
            self.windows.append(client_window(name, share.concurrency, mine, done.get(name), sent))

        tasks = [asyncio.ensure_future(one(i)) for i in range(count)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # one actor failed (or the window was cancelled): the others stop issuing, and
            # nothing they stream later is handed to `sink` (it would land in a bundle
            # already sealed, and their load in the next section)
            for actor in self.actors:
                actor.stop.remote(f"a load client failed in a {label} window")
            await cancel_all(tasks)
            raise
        wall = (time.perf_counter_ns() - started) / 1e9
        return window_result(records, wall, list(done.values()))

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
