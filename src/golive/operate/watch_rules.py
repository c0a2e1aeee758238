"""The post-approval watch's rules: pure functions from the intervals observed so far to the
triggers that fire. The checklist's four rollback triggers, the health trigger, engine
restarts and HTTP 5xx alerts, and the silence rule (metrics missing for K intervals is an
alert and freezes the other rules: silence is not health, and no rollback is decided
blind)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|torch\.OutOfMemoryError|OOMKilled|"
    r"Out of memory: Killed process|cudaErrorMemoryAllocation|NVML.*allocation fail",
    re.IGNORECASE,
)
COMM = re.compile(
    r"NCCL (WARN|ERROR)|ncclSystemError|ncclInternalError|NVRM: Xid|Xid \d+|NVLink.*error", re.I
)
RESTART = re.compile(r"Back-off restarting|container .* restarted|Restarting container", re.I)


@dataclass(frozen=True, slots=True)
class Observation:
    """One watch interval."""

    t: float
    healthy: bool  # /health answered 2xx and the synthetic completion met its deadline
    health_detail: str = ""
    metrics_ok: bool = True
    running: float | None = None
    waiting: float | None = None
    prompt_tps: float | None = None
    generation_tps: float | None = None
    cache_queries: float | None = None
    cache_hits: float | None = None
    cached_tokens: float | None = None
    errors: float | None = None  # requests finished with error/abort in the interval
    parse_failures: float | None = None  # tool-parser outcomes other than (no_)tool_call
    retries: float | None = None  # probe attempts beyond the first
    tool_probe_ok: bool | None = None  # None: no tool probe this interval
    tool_probe_detail: str = ""
    cache_ratio: float | None = None  # None: no cache probe this interval
    oom_lines: tuple[str, ...] = ()
    comm_lines: tuple[str, ...] = ()
    restart_lines: tuple[str, ...] = ()
    gpu_used_mib: float | None = None
    kv_usage: float | None = None
    http_status: Mapping[str, float] | None = None  # answers by status class; None: unmeasured
    engine_restart: str = ""  # why the engine is a new process since the last interval
    container_restarts: tuple[str, ...] = ()  # pods whose engine container restarted, and why
    container_oom: bool = False  # ... one of them because it was OOMKilled


@dataclass(frozen=True, slots=True)
class Thresholds:
    max_waiting: float = 1.0  # waiting requests above this are outside the envelope
    max_concurrency: int | None = None  # running + waiting above this are outside it
    repeated: int = 3  # consecutive intervals outside the envelope that fire the trigger
    health_intervals: int = 2
    cache_floor: float | None = None  # probe hit ratio below this is a regression
    missing_limit: int = 3
    max_5xx_share: float = 0.05  # HTTP 5xx answers beyond this share of an interval's


@dataclass(frozen=True, slots=True)
class Trigger:
    rule: str
    rollback: bool  # a rollback trigger (else an alert)
    reason: str
    evidence: dict[str, object] = field(default_factory=dict)


def classify_log(lines: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """(OOM lines, communication-error lines, restart lines) among new log lines."""
    return tuple(tuple(x[:300] for x in lines if rx.search(x)) for rx in (OOM, COMM, RESTART))


def evaluate(history: Sequence[Observation], th: Thresholds) -> list[Trigger]:
    """Every trigger the latest interval completes (the caller de-duplicates and cools down)."""
    if not history:
        return []
    last = history[-1]
    out: list[Trigger] = []
    recent = history[-th.health_intervals :]
    if len(recent) == th.health_intervals and not any(o.healthy for o in recent):
        out.append(
            Trigger(
                "engine-health",
                True,
                f"unhealthy for {th.health_intervals} consecutive intervals: {last.health_detail}",
                {"details": [o.health_detail for o in recent]},
            )
        )
    out += _restart_and_oom(history)
    silent = history[-th.missing_limit :]
    if len(silent) == th.missing_limit and not any(o.metrics_ok for o in silent):
        out.append(
            Trigger(
                "metrics-silent",
                False,
                f"no metrics for {th.missing_limit} consecutive intervals: silence is not health; "
                "the envelope rules are frozen until metrics return",
            )
        )
        return out
    if last.comm_lines or last.restart_lines:
        out.append(
            Trigger(
                "node-errors",
                False,
                "inter-node communication errors or container restarts in the log",
                {"comm": last.comm_lines, "restarts": last.restart_lines},
            )
        )
    # the last intervals that answered anything (one without answers neither breaks nor
    # extends the run), the latest among them
    latest = (o for o in reversed(history) if _share_5xx(o) is not None)
    answered = list(itertools.islice(latest, th.repeated))[::-1]
    shares = [_share_5xx(o) or 0.0 for o in answered]
    if (
        len(answered) == th.repeated
        and answered[-1] is last
        and all(x > th.max_5xx_share for x in shares)
    ):
        out.append(
            Trigger(
                "http-errors",
                False,
                f"HTTP 5xx answers above {th.max_5xx_share:.0%} of the server's answers in "
                f"{th.repeated} intervals in a row (last {shares[-1]:.0%}, from its own "
                "http_requests_total)",
                {"http_status": [o.http_status for o in answered]},
            )
        )
    window = history[-th.repeated :]
    if len(window) == th.repeated and all(_outside(o, th) for o in window):
        out.append(
            Trigger(
                "queue-envelope",
                True,
                f"outside the accepted queue envelope for {th.repeated} consecutive intervals "
                f"(running {last.running:g}, waiting {last.waiting:g}; accepted: waiting <= "
                f"{th.max_waiting:g}, concurrency <= {th.max_concurrency})",
                {"running": [o.running for o in window], "waiting": [o.waiting for o in window]},
            )
        )
    probes = [o for o in history if o.tool_probe_ok is not None][-2:]
    parse = [o for o in history[-2:] if (o.parse_failures or 0) > 0]
    if (len(probes) == 2 and not any(o.tool_probe_ok for o in probes)) or len(parse) == 2:
        out.append(
            Trigger(
                "tool-call-schema",
                True,
                "schema-invalid tool calls on the critical workflow: "
                + (
                    probes[-1].tool_probe_detail
                    if probes
                    else "the engine's parser reports failures"
                ),
                {"probe_details": [o.tool_probe_detail for o in probes]},
            )
        )
    ratios = [o.cache_ratio for o in history if o.cache_ratio is not None][-2:]
    if th.cache_floor is not None and len(ratios) == 2 and all(r < th.cache_floor for r in ratios):
        out.append(
            Trigger(
                "cache-regression",
                True,
                f"the probe prefix's hit ratio fell to {ratios[-1]:.2f}, below "
                f"{th.cache_floor:.2f} (half the accepted bundle's)",
                {"ratios": ratios},
            )
        )
    return out


def _restart_and_oom(history: Sequence[Observation]) -> list[Trigger]:
    """OOM from the log, the engine's restarts (its metrics: process start time, counters
    reset) and the container's (Kubernetes restart counts and their reason). A restart with
    an OOM line since the last interval that read metrics, or a container OOMKilled, is the
    OOM trigger (the restart names the death the line explains); one with no cause shown
    alerts."""
    last = history[-1]
    lines = tuple(line for o in _since_last_metrics(history) for line in o.oom_lines)
    restarted = "; ".join(x for x in (last.engine_restart, *last.container_restarts) if x)
    evidence: dict[str, object] = {"restart": restarted, "lines": lines}
    if last.container_oom or (restarted and lines):
        reason = f"OOM under the approved traffic profile: the engine restarted ({restarted})"
        return [Trigger("oom", True, reason, evidence)]
    out = []
    if last.oom_lines:
        reason = "OOM under the approved traffic profile"
        out.append(Trigger("oom", True, reason, {"lines": last.oom_lines}))
    if restarted:
        reason = (
            f"the engine restarted ({restarted}) and nothing shown explains it: read the "
            "container's last termination reason (OOMKilled is the OOM trigger; "
            "--k8s-namespace reads it) or pass --log"
        )
        out.append(Trigger("engine-restart", False, reason, {"restart": restarted}))
    return out


def _since_last_metrics(history: Sequence[Observation]) -> list[Observation]:
    """The latest interval and those back to the last one before it that read metrics: a
    restart is seen at the first scrape after the engine came back, however long it took,
    and an OOM line written when it died belongs to that restart."""
    back = [history[-1]]
    for o in reversed(history[:-1]):
        back.append(o)
        if o.metrics_ok:
            break
    return back


def _share_5xx(o: Observation) -> float | None:
    """The interval's share of HTTP 5xx answers; None when it answered nothing measured."""
    if not o.http_status:
        return None
    total = sum(o.http_status.values())
    return o.http_status.get("5xx", 0.0) / total if total > 0 else None


def _outside(o: Observation, th: Thresholds) -> bool:
    if o.running is None or o.waiting is None:
        return False
    over_cap = th.max_concurrency is not None and o.running + o.waiting > th.max_concurrency
    return o.waiting > th.max_waiting or over_cap


def probe_reuse_ratio(
    prompt_tokens: int | None, api_cached: int | None, engine_hits: float | None
) -> float | None:
    """The cache probe's reused share of its prompt: the API's cached_tokens where the
    server reports them, else the engine's hit counter around the probe (which also counts
    concurrent traffic, so it can only over-state reuse: a low value is a real regression).
    None when neither was measured, never 0."""
    if not prompt_tokens:
        return None
    if api_cached is not None:
        return round(api_cached / prompt_tokens, 3)
    if engine_hits is not None:
        return round(min(1.0, engine_hits / prompt_tokens), 3)
    return None
