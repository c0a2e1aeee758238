"""Load from several processes of this machine: `--workers N` (`auto`: one per core but one).

One core parses and records about 4,000 streamed answers a second (docs/performance.md); a
larger deployment needs more. `ProcessLoad` starts N worker processes (spawned, so none
inherits the main process's loop or threads), each with its own event loop, `TargetClient`
and `run_schedule`, watchdog included, and splits every load window over them the way the
Ray clients do (`load_split.shares`). A worker does the whole per-request job itself: it
sends, parses the answer, decides whether its full bodies are kept (its share of the
`records` sample) and renders the bundle's JSON line. The main process only appends those
lines to the one bundle as they arrive (batches over a pipe) and keeps the parsed answers for
the window's judgement, so it does not become the bottleneck the workers removed. Each
worker measures its own headroom (send lag, loop lag, CPU) and the main process its own; the
worst speaks for the window. Each batch carries the worker's count of requests sent, so the
ledger compares what every worker sent with what the bundle holds. A batch's lines go to the
bundle in one write. A batch crosses the pipe as MessagePack (`to_main`), each answer without
its raw bytes (`for_main`): the hand-off costs a worker ~7 µs a record and the main process
~5 µs to receive it (bench/handoff.py on a Sapphire Rapids core; pickled, it was ~17 and
~14 µs; docs/performance.md, "More than one core").

The API key is read by each worker from the same environment variable: it never travels
(a failed answer's headers cross the pipe redacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from golive.bundle.request_line import line_text
from golive.errors import ConfigError, LoadClientError
from golive.evidence.sampling import running_beside
from golive.traffic.body_sample import BodySample
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.headroom import ClientMonitor, collector_paused, thaw
from golive.traffic.load_split import (
    ClientWindow,
    Interleaved,
    client_window,
    closing,
    shares,
    split,
    window_result,
)
from golive.traffic.records import ParsedResponse, RequestRecord, parse
from golive.traffic.retry import RetryPolicy, send_with_retries
from golive.traffic.schedule import ABORT_GRACE_S, LoadResult, MakeBody, Schedule, run_schedule
from golive.traffic.worker_wire import Batch, for_main, from_worker, to_main

FLUSH_S = 0.02  # a worker hands its records over at least this often ...
FLUSH_RECORDS = 64  # ... or as soon as it holds this many (small writes: no long pipe stall)
SPARE_S = 10.0  # past its own watchdog's bound, a silent worker is taken for dead
START_S = 60.0  # a spawned worker imports golive afresh: ~1 s here, far longer is a fault


class RecordSink(Protocol):
    """Where a window's records go as they arrive (the capacity run's `CapacityRun`)."""

    @property
    def stream_file(self) -> str: ...

    def received_parsed(self, batch: Sequence[tuple[ParsedResponse, str]]) -> None: ...


def worker_count(value: str) -> int:
    """`--workers`: a positive number, or `auto` (the cores golive may use, less one)."""
    if value == "auto":
        return max(1, len(os.sched_getaffinity(0)) - 1)
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"--workers {value!r}: give a positive number of processes, or auto")
    return count


@dataclass(frozen=True, slots=True)
class WorkerWindow:
    """One worker's share of a load window, as it travels to the worker."""

    schedule: Schedule
    make_body: MakeBody
    label: str
    stream: str  # the bundle's record stream: requests/<stream>.jsonl
    sample: BodySample  # this worker's share of which records keep their full bodies
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # the client's timeout, retries


class ProcessLoad:
    """N worker processes for one golive command, started (each has said it is ready);
    `close` them when it ends. Construction blocks for that start (~1 s here)."""

    def __init__(
        self,
        settings: ClientSettings,
        workers: int,
        sample: BodySample,
        start_s: float = START_S,
        retry: RetryPolicy | None = None,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.retry = retry or RetryPolicy()
        self.names = [f"worker-{i}" for i in range(workers)]
        self.conns: list[Connection] = []
        self.procs: list[BaseProcess] = []
        firsts = (split(sample.first, workers) + [0] * workers)[:workers]  # first 0: all 0
        self._samples = [BodySample(first, sample.every) for first in firsts]
        for name in self.names:
            mine, theirs = context.Pipe()
            proc = context.Process(
                target=serve, args=(theirs, name, settings), name=f"golive-{name}"
            )
            proc.daemon = True
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)
        self._sent: dict[str, int] = {}
        self.windows: list[ClientWindow] = []
        try:
            self._wait_started(start_s)
        except LoadClientError:
            self.close()
            raise

    def _wait_started(self, within_s: float) -> None:
        """Block until every worker says its loop and client are up, so that a worker that
        cannot start is found before any traffic, naming it (not as a window that never
        ends, minutes later)."""
        deadline = time.monotonic() + within_s
        for name, conn, proc in zip(self.names, self.conns, self.procs, strict=True):
            try:
                message = conn.recv() if conn.poll(max(0.0, deadline - time.monotonic())) else None
            except (EOFError, OSError):
                proc.join(timeout=5)
                raise LoadClientError(
                    f"{name} exited while starting (exit code {proc.exitcode}; its traceback "
                    "is on stderr above). A worker is a fresh Python process that imports the "
                    "main module again: a script that starts golive needs its entry under "
                    "`if __name__ == '__main__':`"
                ) from None
            if message is None:
                raise LoadClientError(
                    f"{name} did not start within {within_s:g} s (a fresh Python process "
                    "importing golive; is the machine overloaded, or does the main module "
                    "start work when imported, without `if __name__ == '__main__':`?)"
                )
            if message[0] != "ready":
                raise LoadClientError(f"{name} failed while starting: {message[1]}")

    @property
    def chat_requests(self) -> int:
        """Chat requests the workers reported sending (for the ledger)."""
        return sum(self._sent.values())

    def stop(self, reason: str) -> int:
        """Stop issuing and end what is in flight, in every worker (each still records it)."""
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(("stop", reason))
        return 0

    async def run(
        self, schedule: Schedule, make_body: MakeBody, label: str, sink: RecordSink, key: str
    ) -> LoadResult:
        """One load window split over the workers; each record is handed to `sink` (parsed,
        with its bundle line) as it arrives. `key` tells this window's counts apart."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter_ns()
        parts = shares(schedule, len(self.conns))
        records: list[list[RequestRecord]] = [[] for _ in parts]
        done: dict[int, dict[str, Any]] = {}
        ended = [loop.create_future() for _ in parts]

        def fail(i: int, message: str) -> None:  # the window ends, naming the worker
            loop.remove_reader(self.conns[i].fileno())
            if not ended[i].done():
                ended[i].set_exception(LoadClientError(f"{self.names[i]} {message}"))

        def readable(i: int) -> None:
            try:
                kind, payload, sent = self.conns[i].recv()
            except (EOFError, OSError) as exc:
                fail(i, f"stopped mid-window (exit code {self.procs[i].exitcode}, {exc!r})")
                return
            if sent is not None:
                self._sent[f"{key}/{self.names[i]}"] = sent
            if kind == "records":
                try:  # never a batch dropped in silence (a reader's error is only logged)
                    batch = from_worker(payload)
                    sink.received_parsed(batch)
                except Exception as exc:
                    fail(i, f"sent records the main process could not take: {exc!r}")
                    return
                records[i].extend(parsed.record for parsed, _ in batch)
            elif kind == "done":
                done[i] = payload
                loop.remove_reader(self.conns[i].fileno())
                ended[i].set_result(None)
            else:  # the worker's own failure, with its traceback text
                fail(i, f"failed: {payload}")

        try:
            for i, share in enumerate(parts):
                self._start(i, WorkerWindow(
                    share,
                    Interleaved(make_body, i, len(parts)),
                    f"{label}@{self.names[i]}",
                    sink.stream_file,
                    self._samples[i],
                    self.retry,
                ), label)  # fmt: skip
                loop.add_reader(self.conns[i].fileno(), readable, i)
            await self._ended(ended, schedule)
        except BaseException:
            # the window ends here for every worker: those still sending stop, and nothing
            # they send later is read (it would land in a bundle already sealed: seen when
            # a worker was found gone after its sibling had started its share)
            self.stop(f"a load client failed in a {label} window")
            raise
        finally:
            for i in range(len(parts)):
                loop.remove_reader(self.conns[i].fileno())
            for end in ended:  # a second failure after the first is not left unretrieved
                if end.done() and not end.cancelled():
                    end.exception()
        wall_s = (time.perf_counter_ns() - started) / 1e9
        for i, share in enumerate(parts):
            name = self.names[i]
            sent = self._sent.get(f"{key}/{name}", 0)
            self.windows.append(client_window(name, share.concurrency, records[i], done[i], sent))
        return window_result([r for mine in records for r in mine], wall_s, list(done.values()))

    async def _ended(self, ended: list[asyncio.Future[None]], schedule: Schedule) -> None:
        """Every worker's end of the window, within its watchdog's bound and a spare."""
        bound = schedule.duration_s + schedule.drain_s + ABORT_GRACE_S + SPARE_S
        try:
            await asyncio.wait_for(asyncio.gather(*ended), bound)
        except TimeoutError as exc:
            silent = ", ".join(self.names[i] for i, end in enumerate(ended) if not end.done())
            raise LoadClientError(
                f"{silent} gave no end to a {schedule.duration_s:g} s window within {bound:g} s"
            ) from exc

    def _start(self, i: int, window: WorkerWindow, label: str) -> None:
        try:
            self.conns[i].send(("run", window))
        except OSError as exc:  # a broken pipe: the process is gone
            code = self.procs[i].exitcode
            raise LoadClientError(
                f"{self.names[i]} is gone (exit code {code}) before a {label} window ({exc})"
            ) from exc

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(("close", None))
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():  # it ignores SIGTERM (see `serve`)
                proc.kill()
                proc.join(timeout=5)
        for conn in self.conns:
            conn.close()


def serve(conn: Connection, name: str, settings: ClientSettings) -> None:
    """A worker process's life: windows from the main process until `close` (or the main
    process is gone). Ctrl-C and SIGTERM reach the whole process group; only the main
    process acts on them: it stops the windows, whose workers still send every record."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(_Worker(conn, settings).serve())


class _Worker:
    def __init__(self, conn: Connection, settings: ClientSettings) -> None:
        self.conn = conn
        self.settings = settings
        self.sample: BodySample | None = None  # kept across windows: `first` counts per stream
        self.stopped = asyncio.Event()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def readable() -> None:
            try:
                inbox.put_nowait(self.conn.recv())
            except (EOFError, OSError):  # the main process is gone
                loop.remove_reader(self.conn.fileno())
                inbox.put_nowait(("close", None))

        loop.add_reader(self.conn.fileno(), readable)
        window: asyncio.Task[None] | None = None
        async with TargetClient(self.settings) as client:
            self.conn.send(("ready", None, None))
            while True:
                kind, payload = await inbox.get()
                if kind == "run":
                    self.stopped = asyncio.Event()
                    window = asyncio.ensure_future(self.window(client, payload))
                elif kind == "stop":
                    self.stopped.set()
                    client.abort_in_flight(payload)
                else:
                    break
            if window is not None and not window.done():
                window.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await window

    async def window(self, client: TargetClient, w: WorkerWindow) -> None:
        try:
            await self._window(client, w)
        except Exception as exc:  # reported to the main process, which raises it there
            self.conn.send(("failed", f"{type(exc).__name__}: {exc}", None))

    async def _window(self, client: TargetClient, w: WorkerWindow) -> None:
        if self.sample is None:
            self.sample = w.sample
        sample = self.sample
        batch: Batch = []
        before = client.chat_requests  # one client serves every window: count this one's

        def flush() -> None:
            if batch:
                self.conn.send(("records", to_main(batch), client.chat_requests - before))
                batch.clear()

        def keep(record: RequestRecord) -> None:
            parsed = parse(record)
            line = line_text(parsed.saved_line(sample.keep(w.stream, parsed)))
            batch.append((for_main(parsed), line))
            if len(batch) >= FLUSH_RECORDS:
                flush()

        async def send(body: Any, label: str, scheduled_ns: int) -> RequestRecord:
            record = await send_with_retries(
                client.chat, body, label, scheduled_ns, w.retry, keep, None, self.stopped
            )
            # inline, not within loop_turns' budget: each message's `sent` (chat_requests)
            # must count only requests whose records it or an earlier message carries
            keep(record)
            return record

        def end(reason: str) -> int:  # the window's end: no more retries either
            self.stopped.set()
            return client.abort_in_flight(reason)

        monitor = ClientMonitor()
        with collector_paused():
            async with running_beside(monitor.watch()), running_beside(_every(FLUSH_S, flush)):
                result = await run_schedule(
                    w.schedule,
                    send,
                    w.make_body,
                    w.label,
                    stop=self.stopped,
                    abort=end,
                )
        thaw()
        flush()
        self.conn.send(
            ("done", closing(result, monitor.figures(())), client.chat_requests - before)
        )


async def _every(seconds: float, work: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(seconds)
        work()
