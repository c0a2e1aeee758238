"""`golive capacity`: the four pressure phases, with memory curves and termination records.

1 model load (from the startup log and, when golive started the server, its load curve);
2 long input at increasing context; 3 concurrent Agent traffic on a concurrency ramp;
4 sustained load. Every phase is bounded (duration and request cap) and stops on engine
death; a death leaves `memory/termination.json` with the preceding memory curve, the
in-flight request shapes, the concurrency and the context configuration.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from golive.bundle.layout import (
    MEMORY_CURVE,
    TERMINATION,
    TERMINATION_AFTER_RESTART,
)
from golive.checks.capacity.deaths import HEALTH_STREAM
from golive.checks.capacity.failures import clip
from golive.checks.capacity.measured import CAPACITY_CEILING
from golive.checks.capacity.rules import (
    Action,
    Classification,
)
from golive.checks.capacity.step_stats import StepStats
from golive.checks.context import CheckContext, PhaseProgress, Quiet
from golive.evidence.ray_gpu_curve import RayGpuCurves
from golive.evidence.sampling import Curve, Probe, host_probe
from golive.evidence.startup_log import StartupFacts
from golive.results import CAPACITY_RESULT, CheckLimits, CheckResult, Status
from golive.results import Classification as Classified
from golive.traffic.loop_turns import loop_turns
from golive.traffic.records import (
    FailureKind,
    ParsedResponse,
    RequestRecord,
    error_message,
)
from golive.traffic.retry import RetryPolicy, RetryTally, send_with_retries
from golive.traffic.schedule import LoadResult, MakeBody, Schedule

_CONTEXT_ERROR = (
    "maximum context length",
    "max_model_len",
    "context length",
    "too long",
    "exceeds",
)


class LoadClients(Protocol):
    """Load windows driven by other processes (`traffic/process_load.ProcessLoad`) or other
    machines (`traffic/ray_load.RayLoad`); each record reaches `sink` as it arrives."""

    windows: list[Any]  # per client and window: requests, sent, scheduling lag

    async def run(
        self, schedule: Schedule, make_body: MakeBody, label: str, sink: CapacityRun, key: str
    ) -> LoadResult: ...

    def stop(self, reason: str) -> int: ...


@dataclass(frozen=True, slots=True)
class CapacityInputs:
    """What only the caller knows: the local PID, the startup facts, a user sample."""

    target_pid: int | None = None
    startup: StartupFacts | None = None
    load_curve: tuple[tuple[float, float], ...] = ()
    sample: tuple[Mapping[str, Any], ...] = ()
    gpu_curves: tuple[Path, ...] = ()  # CSVs written by `env collect --gpu-curve` on nodes
    ray_gpu: RayGpuCurves | None = None  # sample every vLLM Ray node's GPUs (--chain-ray)
    load_span: tuple[float, float] | None = None  # wall clock of a launch golive made
    progress: PhaseProgress = field(default_factory=Quiet)
    clients: LoadClients | None = None  # spread the load windows over these (--ray)
    relaunch: Callable[[], Awaitable[int]] | None = None  # golive's own launch again: new PID


_ACTION_STATUS = {
    Action.STABLE: Status.PASS,
    Action.ADJUST_CONFIGURATION: Status.WARN,
    Action.LIMIT_TRAFFIC: Status.WARN,
    Action.EXPAND_CAPACITY: Status.FAIL,
    Action.FIRST_STEP_FAILED: Status.FAIL,
    Action.NO_DATA: Status.NO_DATA,
    Action.SERVER_REFUSED: Status.FAIL,
    Action.INCONSISTENT: Status.FAIL,
    Action.STALLED: Status.FAIL,
    Action.CONTINUES: Status.FAIL,
}


def classified(
    check_id: str, c: Classification, extra: Mapping[str, Any], evidence: Sequence[str]
) -> CheckResult:
    measurements: dict[str, Any] = dict(extra)
    if c.action is Action.EXPAND_CAPACITY and c.ceiling is not None:
        measurements[CAPACITY_CEILING] = c.ceiling  # what a capacity request sizes from
    limits = CheckLimits(
        max_concurrency=c.ceiling if c.action is Action.LIMIT_TRAFFIC else None,
        max_context=c.max_context if c.action is Action.ADJUST_CONFIGURATION else None,
    )
    return dataclasses.replace(
        CAPACITY_RESULT(
            check_id,
            _ACTION_STATUS[c.action],
            f"{c.action.value}: {c.reason}",
            measurements,
            evidence=evidence,
        ),
        classification=Classified(c.action.value),
        limits=limits,
    )


class CapacityRun:
    """Shared state of one capacity run: phase label, in-flight shapes, death flag."""

    def __init__(
        self, ctx: CheckContext, inputs: CapacityInputs, model: str, max_model_len: int | None
    ) -> None:
        self.ctx = ctx
        self.inputs = inputs
        self.model = model
        self.max_model_len = max_model_len
        self.phase = "setup"
        self.concurrency = 0
        self.in_flight: dict[int, dict[str, Any]] = {}
        self.dead = asyncio.Event()
        self.death: str | None = None
        self.memory: Curve | None = None
        self.probes: list[Probe] = []  # what the memory curve samples (the host's first)
        self.concurrency_ceiling: int | None = None
        self.rate_per_slot = 0.0  # requests/s per concurrency slot, from the calibration window
        self.idle_silence_s = 0.0  # how long a typical answer went without a byte, calibration
        self.ramp_steps: dict[int, StepStats] = {}  # each ramp step's figures, by concurrency
        self.timeline: list[Any] = []
        self.windows: list[dict[str, Any]] = []  # each load window's watchdog row
        self.probes_at_idle = False  # the answer probes' reference answers were taken
        self.bodies = ctx.body_sample()
        self.parsed: dict[str, ParsedResponse] = {}  # this window's answers, parsed once
        # Each run's prompts are its own: a server that kept a previous run's prefixes in its
        # cache would otherwise answer the start of a window from cache and the rest cold,
        # which reads as latency drifting upward (seen on a long-lived target, +60% in 10 s).
        self.workload_seed = random.SystemRandom().randrange(1, 1 << 31)
        self.retry = RetryPolicy.of(ctx.config.client)
        self.tally = RetryTally()  # each window's retried attempts
        self.closing = asyncio.Event()  # no more retries: the window ended or the engine died
        self._n = 0
        self._checking: asyncio.Future[bool] | None = None  # a health check of a client's loss

    async def send(self, body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
        self._n += 1
        key = self._n
        self.in_flight[key] = shape_of(body)
        try:  # as production's client sends it (`client.*`: timeout, retries, backoff)
            record = await send_with_retries(
                self.ctx.target.chat,
                body,
                label,
                scheduled_ns,
                # the concurrent phase sends as production's client; the long-input ladder
                # asks each context size once, as it is (a retried 500 there would pass)
                RetryPolicy() if self.phase == "long_input" else self.retry,
                self._retried,
                lambda r: self._lost(r, body),
                self.closing,
            )
        finally:
            self.in_flight.pop(key, None)
        # parsed and written within the loop's turn budget: a batch of answers that end together
        # does not hold the loop (and every read's stamp) for the whole batch's work
        save = functools.partial(self.ctx.save, record, self.stream_file, self.bodies)
        self.parsed[record.request_id] = await loop_turns().run(save)
        self.tally.count(record)
        await self._lost(record, body)
        return record

    def _retried(self, record: RequestRecord) -> None:
        """An attempt a retry answers in its place: kept in the stream under its own label."""
        self.parsed[record.request_id] = self.ctx.save(record, self.stream_file, self.bodies)
        self.tally.count(record)

    def close_window(self, reason: str) -> int:
        """The window ends: no more retries, and what is in flight is aborted."""
        self.closing.set()
        return self.ctx.target.abort_in_flight(reason)

    async def _lost(self, record: RequestRecord, body: Mapping[str, Any]) -> None:
        if (lost := connection_lost(record)) is not None:
            await self.check_alive(lost, body)

    def follow(self, pid: int) -> None:
        """The server runs again as `pid` (relaunched): its host memory is sampled now."""
        if self.inputs.target_pid is not None and self.probes:
            self.probes[0] = host_probe(pid)

    @property
    def stream_file(self) -> str:
        """The record stream of the phase running: `requests/<stream_file>.jsonl`."""
        return f"capacity-{self.phase}"

    def received(self, record: RequestRecord) -> None:
        """A record sent by another machine's client (--ray): saved as it arrives."""
        self.parsed[record.request_id] = self.ctx.save(record, self.stream_file, self.bodies)
        self._arrived(record)

    def received_parsed(self, batch: Sequence[tuple[ParsedResponse, str]]) -> None:
        """Records a worker process (--workers) sent, parsed and rendered: their lines are
        appended as they are, in one write."""
        self.ctx.bundle.append_text(
            f"requests/{self.stream_file}.jsonl", "".join(line for _, line in batch)
        )
        for parsed, _ in batch:
            self.parsed[parsed.record.request_id] = parsed
            self.ctx.progress.record(parsed.record.ok)  # not through ctx.save, which counts
            self._arrived(parsed.record)

    def _arrived(self, record: RequestRecord) -> None:
        self.tally.count(record)
        lost = connection_lost(record)
        if lost is not None and self._checking is None and not self.dead.is_set():
            self._checking = asyncio.ensure_future(self.check_alive(lost))
            self._checking.add_done_callback(self._checked)

    def _checked(self, _: asyncio.Future[bool]) -> None:
        self._checking = None

    async def check_alive(self, reason: str, body: Mapping[str, Any] | None = None) -> bool:
        if self.dead.is_set():
            return False
        # saved: a death record names the failed answer that shows it (deaths.py)
        health = self.ctx.save(
            await self.ctx.target.get("/health", "capacity-health"), HEALTH_STREAM
        )
        if health.record.ok:
            return True
        failure = health.record.failure
        if failure is not None and failure.kind is FailureKind.CANCELLED:
            return True  # golive ended the check itself (a window's end): nothing was learnt
        if self.dead.is_set():  # another loss of the same death was recorded meanwhile
            return False
        in_flight = [*self.in_flight.values(), *([shape_of(body)] if body else [])]
        self.death = reason
        self.dead.set()
        self.closing.set()
        # a death after a restart (restart.py) keeps the first one's record beside it
        first = not self.ctx.bundle.path(TERMINATION).exists()
        path = TERMINATION if first else TERMINATION_AFTER_RESTART
        record = {
            **self.termination(reason, in_flight),
            "health_request_id": health.record.request_id,
        }
        self.ctx.bundle.write_json(path, record)
        return False

    def termination(self, reason: str, in_flight: list[dict[str, Any]]) -> dict[str, Any]:
        rows = self.memory.rows[-300:] if self.memory else []
        startup = self.inputs.startup
        return {
            "reason": reason,
            "phase": self.phase,
            "concurrency": self.concurrency,
            "at": time.time(),
            "in_flight_requests": in_flight,
            "context": {
                "max_model_len": self.max_model_len,
                "max_context": self.ctx.config.capacity.max_context,
            },
            "topology": None if startup is None else startup.parallel(),
            "preceding_memory_curve": rows,
            "memory_curve_file": MEMORY_CURVE,
        }


def connection_lost(record: RequestRecord) -> str | None:
    """How the connection failed or broke, or the server answered 5xx (the engine may have
    died: /health is asked)."""
    failure = record.failure
    if failure is None:
        return None
    if failure.kind in (FailureKind.CONNECT, FailureKind.DISCONNECTED):
        return f"{failure.kind.value}: {failure.message}"
    # a dead engine core behind a live API server answers HTTP 500 at once: ask /health too
    status = record.status
    if isinstance(status, int) and status >= 500:
        return f"HTTP {status}: {failure.message}"
    return None


def shape_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The shape of a request for records: sizes and features, not the whole text."""
    messages = body.get("messages") or []
    chars = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
    return {
        "messages": len(messages),
        "prompt_chars": chars,
        "tools": len(body.get("tools") or []),
        "structured": "response_format" in body,
        "max_tokens": body.get("max_tokens"),
        "stream": bool(body.get("stream")),
    }


def refusal(parsed: ParsedResponse) -> str:
    """The server's own words for a 4xx answer (quoted in the finding)."""
    record = parsed.record
    message = error_message(parsed.json_body) or (record.failure.message if record.failure else "")
    return clip(f"HTTP {record.status}: {message}")


def seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000
