"""What one watch interval reads from the server's own metrics, and which Agent case its
tool-call probe runs.

From two consecutive scrapes: the queue gauges, token rates, prefix-cache counters, engine
error/abort finishes, tool-parser failures, the KV-cache usage, the server's own HTTP status
counts (`http_requests_total` by status class: the "request error codes" the checklist
watches, which engine abort counts are not), and whether the engine restarted between them:
its process start time moved, or its counters went backwards (a new process counts from 0).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from golive.checks.agent.cases import AgentCase
from golive.checks.agent.rules import Expect
from golive.checks.agent.select import known_cases
from golive.config import GoliveConfig
from golive.errors import ConfigError, EvidenceError
from golive.evidence.k8s_env import ContainerRestarts, K8sSource, read_restarts
from golive.metrics import MetricsDelta, Snapshot
from golive.profiles import Profile

# counters that only grow while one engine process lives: one that went backwards is a restart
RESTART_COUNTERS = ("request_success", "prompt_tokens", "generation_tokens", "http_requests")
START_TIME = "process_start_time_seconds"
DEFAULT_PROBE = "one_arg.required"
T = TypeVar("T")


def interval_values(previous: Snapshot | None, snapshot: Snapshot | None) -> dict[str, Any]:
    """The `Observation` fields one scrape gives, against the previous interval's scrape
    (rates, counts and restarts need both; the gauges only this one)."""
    if snapshot is None:
        return {}
    values: dict[str, Any] = {
        "running": snapshot.value("num_requests_running"),
        "waiting": snapshot.value("num_requests_waiting"),
        "kv_usage": snapshot.value("kv_cache_usage_perc", "max"),
    }
    if previous is None:
        return values
    delta = MetricsDelta(previous, snapshot)
    seconds = max(delta.seconds, 1e-6)
    prompt, generated = delta.counter("prompt_tokens"), delta.counter("generation_tokens")
    failures = {
        s.label("outcome") or ""
        for s in snapshot.series("tool_call_parser_invocations")
        if s.label("outcome") not in ("tool_call", "no_tool_call", None)
    }
    values.update(
        prompt_tps=None if prompt is None else prompt / seconds,
        generation_tps=None if generated is None else generated / seconds,
        cache_queries=delta.counter("prefix_cache_queries"),
        cache_hits=delta.counter("prefix_cache_hits"),
        cached_tokens=delta.counter("prompt_tokens_cached"),
        errors=sum(
            delta.counter("request_success", finished_reason=r) or 0.0 for r in ("error", "abort")
        ),
        parse_failures=sum(
            delta.counter("tool_call_parser_invocations", outcome=o) or 0.0 for o in failures
        ),
        http_status=http_status_counts(delta, snapshot),
        engine_restart=restart_evidence(previous, snapshot),
    )
    return values


def http_status_counts(delta: MetricsDelta, snapshot: Snapshot) -> dict[str, float] | None:
    """Requests the server answered in the interval (`delta`, ending at `snapshot`), by
    status class ("2xx", "4xx", "5xx"), from its own `http_requests_total`; None where the
    server exposes no such series (not zero errors: unmeasured)."""
    classes = {s.label("status") for s in snapshot.series("http_requests")} - {None}
    if not classes:
        return None
    counts = {c: delta.counter("http_requests", status=c) for c in sorted(str(c) for c in classes)}
    return {c: round(v, 3) for c, v in counts.items() if v is not None}


def restart_evidence(previous: Snapshot, snapshot: Snapshot) -> str:
    """Why the engine behind these two scrapes is a new process ("" when nothing says so)."""
    before, after = previous.value(START_TIME, "max"), snapshot.value(START_TIME, "max")
    if before is not None and after is not None and abs(after - before) > 1.0:
        return f"process start time moved from {before:.0f} to {after:.0f}"
    for name in RESTART_COUNTERS:
        was, now = previous.value(name), snapshot.value(name)
        if was is not None and now is not None and now < was:
            return f"counter {previous.resolve(name)} went back from {was:g} to {now:g}"
    return ""


def probe_case(config: GoliveConfig, profile: Profile) -> AgentCase:
    """The tool-call probe's case: `watch.critical_probe` (a shipped case or one of the
    user's schema cases), else the profile's first critical case that expects a call, else
    `one_arg.required`."""
    cases = {c.name: c for c in known_cases(config.agent)}
    named = config.watch.critical_probe
    if named is not None:
        if named not in cases:
            raise ConfigError(
                f"watch.critical_probe: no Agent case {named!r}; choose one of "
                + ", ".join(sorted(cases))
                + " (a user schema case needs agent.schemas_file)"
            )
        return cases[named]
    for name in profile.agent.critical_cases:
        case = cases.get(name)
        if case is not None and case.expect is Expect.CALL:
            return case
    return cases[DEFAULT_PROBE]


class Background(Generic[T]):
    """A probe running beside the intervals: started when due (if not already running),
    taken in the interval it has finished."""

    def __init__(self) -> None:
        self.task: asyncio.Task[T] | None = None

    def start(self, make: Callable[[], Awaitable[T]]) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(make())

    def take(self) -> T | None:
        if self.task is None or not self.task.done():
            return None
        task, self.task = self.task, None
        return task.result()

    async def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.task = None


class PodRestarts:
    """The engine containers' restart counts, read from Kubernetes beside the intervals: the
    counts when the watch began, then each increase with the reason the run ended
    (`OOMKilled` is the OOM trigger). Only pods running the accepted image count (the old
    colour of a blue/green deployment shares its labels). Without `--k8s-namespace` it reads
    nothing."""

    def __init__(self, source: K8sSource | None, digest: str | None = None) -> None:
        self.source = source
        self.digest = digest  # the accepted image's digest, where the bundle knows it
        self.known: dict[str, int] = {}
        self.reading: Background[dict[str, ContainerRestarts] | None] = Background()

    def _ours(self, pods: dict[str, ContainerRestarts]) -> dict[str, ContainerRestarts]:
        return {
            name: pod
            for name, pod in pods.items()
            if pod.found and (self.digest is None or pod.digest in (None, self.digest))
        }

    async def baseline(self) -> None:
        """The counts before the first interval. A watch told to read pods it cannot read,
        or whose selector and container name match no engine container of the accepted
        image, refuses to start (the error names the API or the selector and the fix)."""
        if self.source is None:
            return
        where = f"watch --k8s-namespace {self.source.namespace} --selector {self.source.selector}"
        try:
            pods = await asyncio.to_thread(read_restarts, self.source)
        except EvidenceError as exc:
            raise ConfigError(f"watch --k8s-namespace: {exc}") from exc
        ours = self._ours(pods)
        if not ours:
            missing = [n for n, p in pods.items() if not p.found]
            raise ConfigError(
                f"{where}: no pod runs the engine container of the accepted image ("
                + (f"{len(pods)} pod(s) selected" if pods else "no pod selected")
                + (f"; without the container: {', '.join(sorted(missing))}" if missing else "")
                + "): check --selector and --k8s-container"
            )
        self.known = {name: pod.restarts for name, pod in ours.items()}

    async def _read(self) -> dict[str, ContainerRestarts] | None:
        assert self.source is not None
        try:
            return await asyncio.to_thread(read_restarts, self.source)
        except EvidenceError:
            return None  # one failed read claims nothing; the next interval reads again

    def changes(self) -> tuple[tuple[str, ...], bool]:
        """(each pod whose engine container restarted since the last read, any OOMKilled).
        A pod missing from one listing keeps its count; a new pod counts from its first
        listing (restarts before the watch saw it are not the watch's)."""
        if self.source is None:
            return (), False
        self.reading.start(self._read)
        now = self.reading.take()
        if now is None:
            return (), False
        found, oom = [], False
        for name, pod in sorted(self._ours(now).items()):
            before = self.known.get(name)
            if before is not None and pod.restarts > before:
                why = pod.reason or "reason not given"
                found.append(
                    f"pod {name}: engine container restarts {before} to {pod.restarts} ({why})"
                )
                oom = oom or pod.reason == "OOMKilled"
            self.known[name] = pod.restarts
        return tuple(found), oom
