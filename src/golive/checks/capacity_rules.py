"""Pure capacity analysis: per-step statistics, stability, trends and the checklist's three
actions (adjust configuration, limit traffic, expand capacity). Table-tested, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass


class Action(enum.StrEnum):
    STABLE = "stable"
    ADJUST_CONFIGURATION = "adjust-configuration"  # stable; context/concurrency above envelope
    LIMIT_TRAFFIC = "limit-traffic"  # stable only under a lower, measured ceiling
    EXPAND_CAPACITY = "expand-capacity"  # OOM, collapse, stalls or restarts despite limits
    NO_DATA = "no-data"  # the phase could not measure what it judges
    SERVER_REFUSED = "server-refused"  # HTTP 4xx: the server's configuration, not its capacity
    INCONSISTENT = "inconsistent-limits"  # accepted what its own limits say it must refuse


MIN_SUSTAINED_COMPLETIONS = 3  # a latency trend needs at least three points


@dataclass(frozen=True, slots=True)
class Classification:
    action: Action
    reason: str
    ceiling: int | None = None  # highest stable concurrency
    max_context: int | None = None  # largest accepted context (tokens)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class StepStats:
    """One concurrency step of the Agent-traffic phase."""

    concurrency: int
    completed: int
    errors: int
    wall_s: float
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    ttft_p95_s: float | None
    queue_mean_s: float | None  # from the engine's request_queue_time histogram
    max_waiting: float | None
    max_running: float | None
    preemptions: float | None
    engine_died: bool = False
    mean_waiting: float | None = None  # the engine's waiting gauge, averaged over the step
    refused: int = 0  # errors that were HTTP 4xx (counted in `errors` too)
    refused_detail: str = ""  # the server's message for the first of them

    def to_json(self) -> dict[str, object]:
        """One line of `metrics/capacity-steps.jsonl`."""
        return {**dataclasses.asdict(self), "throughput_rps": self.throughput_rps}

    @property
    def engine_measured(self) -> bool:
        """Whether the engine's own queue gauges or histogram were read during the step."""
        return self.max_running is not None or self.queue_mean_s is not None

    @property
    def throughput_rps(self) -> float:
        return self.completed / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class StabilityPolicy:
    """When a step counts as stable. Queue time is judged against the work itself."""

    max_error_rate: float = 0.0
    max_queue_s: float = 0.5  # below this, queueing is noise
    max_queue_share: float = 0.25  # queue time as a share of median end-to-end latency
    min_throughput_gain: float = 1.2  # doubling concurrency must buy at least this much more
    max_latency_growth: float = 1.5  # ... or latency may grow at most this much
    max_mean_waiting: float = 0.5  # requests held in the engine's waiting queue, on average
    max_preemptions: float = 0.0  # the engine preempted running requests (KV cache exhausted)


def saturated(previous: StepStats, step: StepStats, policy: StabilityPolicy) -> str | None:
    """The knee: more concurrency bought no throughput, only latency (requests queue)."""
    if not previous.throughput_rps or not previous.e2e_p50_s or not step.e2e_p50_s:
        return None
    gain = step.throughput_rps / previous.throughput_rps
    growth = step.e2e_p50_s / previous.e2e_p50_s
    if gain < policy.min_throughput_gain and growth > policy.max_latency_growth:
        return (
            f"from concurrency {previous.concurrency} to {step.concurrency} throughput changed "
            f"{gain:.2f}x while median latency grew {growth:.1f}x: the extra requests only queue "
            f"(queue {step.queue_mean_s or 0:.2f} s on average, waiting up to {step.max_waiting:g})"
        )
    return None


def step_stable(step: StepStats, policy: StabilityPolicy) -> tuple[bool, str]:
    if step.engine_died:
        return False, f"the engine terminated at concurrency {step.concurrency}"
    total = step.completed + step.errors
    if total == 0:
        return False, f"no request finished at concurrency {step.concurrency}"
    if step.errors / total > policy.max_error_rate:
        return False, f"{step.errors}/{total} requests failed at concurrency {step.concurrency}"
    if step.preemptions is not None and step.preemptions > policy.max_preemptions:
        return False, (
            f"the engine preempted {step.preemptions:g} running request(s) at concurrency "
            f"{step.concurrency}: its KV cache ran out"
        )
    if (
        step.concurrency > 1
        and step.mean_waiting is not None
        and step.mean_waiting >= policy.max_mean_waiting
        and step.max_running is not None
        and step.max_running < step.concurrency
    ):
        return False, (
            f"the engine ran at most {step.max_running:g} of {step.concurrency} concurrent "
            f"requests while {step.mean_waiting:.1f} waited on average: the queue grows"
        )
    queue = step.queue_mean_s
    if queue is not None and step.e2e_p50_s:
        limit = max(policy.max_queue_s, policy.max_queue_share * step.e2e_p50_s)
        if queue > limit:
            return False, (
                f"requests waited {queue:.2f} s on average in the queue at concurrency "
                f"{step.concurrency} (limit {limit:.2f} s; waiting up to {step.max_waiting:g})"
            )
    return True, f"stable at concurrency {step.concurrency}"


def classify_concurrency(steps: Sequence[StepStats], policy: StabilityPolicy) -> Classification:
    """Walk the ramp: the ceiling is the last stable step before the first unstable one."""
    if not steps:
        return Classification(Action.NO_DATA, "no concurrency step ran")
    refused = next((s for s in steps if s.refused), None)
    if refused is not None:
        return Classification(
            Action.SERVER_REFUSED,
            f"the server refused {refused.refused} request(s) with HTTP 4xx at concurrency "
            f"{refused.concurrency} ({refused.refused_detail!r}): the workload uses something "
            "the server is not configured for; fix the request or enable it (not capacity)",
        )
    ceiling: int | None = None
    previous: StepStats | None = None
    for step in steps:
        stable, reason = step_stable(step, policy)
        if stable and not step.engine_measured and not step.engine_died:
            return Classification(
                Action.NO_DATA,
                f"the engine's queue gauges (num_requests_running/waiting) and queue-time "
                f"histogram could not be read at concurrency {step.concurrency}: stability "
                "cannot be judged without them (is --metrics-url a vLLM /metrics?)",
                ceiling,
            )
        knee = saturated(previous, step, policy) if stable and previous is not None else None
        if stable and knee is None:
            ceiling, previous = step.concurrency, step
            continue
        reason = knee or reason
        if ceiling is None:
            return Classification(Action.EXPAND_CAPACITY, reason, ceiling)
        if step.engine_died:  # a lower step was stable: that is the envelope
            return Classification(
                Action.LIMIT_TRAFFIC,
                f"{reason} after concurrency {ceiling} was stable; stable up to {ceiling}",
                ceiling,
            )
        return Classification(
            Action.LIMIT_TRAFFIC, f"{reason}; stable up to concurrency {ceiling}", ceiling
        )
    return Classification(Action.STABLE, f"stable at every step up to {ceiling}", ceiling)


class LongOutcome(enum.StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"  # HTTP 400 with a context-length message: the scheduler refused it
    REFUSED = "refused"  # another HTTP 4xx: a request the server is not configured for
    FAILED = "failed"  # any other error
    DIED = "died"  # the engine stopped answering


@dataclass(frozen=True, slots=True)
class LongStep:
    context_tokens: int
    outcome: LongOutcome
    detail: str = ""
    prompt_tokens: int | None = None  # what the server counted, where it said


def classify_long_input(
    steps: Sequence[LongStep], max_context: int, max_model_len: int | None
) -> Classification:
    """Long inputs up to `max_context` must be served; above the server's limit, refused."""
    accepted = [s.context_tokens for s in steps if s.outcome is LongOutcome.ACCEPTED]
    largest = max(accepted) if accepted else None
    if not steps:
        return Classification(Action.NO_DATA, "no long-input step ran")
    refused = [s for s in steps if s.outcome is LongOutcome.REFUSED]
    if refused:
        return Classification(
            Action.SERVER_REFUSED,
            f"the server refused the {refused[0].context_tokens}-token input with HTTP 4xx "
            f"({refused[0].detail!r}): a configuration finding, not capacity",
            max_context=largest,
        )
    over = [
        s
        for s in steps
        if max_model_len is not None
        and s.outcome is LongOutcome.ACCEPTED
        and (s.prompt_tokens if s.prompt_tokens is not None else s.context_tokens) > max_model_len
    ]
    if over:
        counted = (
            f"{over[0].prompt_tokens} prompt tokens by its own count"
            if over[0].prompt_tokens is not None
            else f"about {over[0].context_tokens} tokens (the server reported no usage)"
        )
        return Classification(
            Action.INCONSISTENT,
            f"the server accepted an input of {counted}, above its max_model_len "
            f"{max_model_len}: it truncates silently or serves another max_model_len than it "
            "reports; the context envelope cannot be trusted",
            max_context=largest,
        )
    died = [s for s in steps if s.outcome is LongOutcome.DIED]
    if died:
        return Classification(
            Action.EXPAND_CAPACITY,
            f"the engine died serving a {died[0].context_tokens}-token input: {died[0].detail}",
            max_context=largest,
        )
    failed = [
        s for s in steps if s.outcome is LongOutcome.FAILED and s.context_tokens <= max_context
    ]
    if failed:
        return Classification(
            Action.EXPAND_CAPACITY,
            f"a {failed[0].context_tokens}-token input failed: {failed[0].detail}",
            max_context=largest,
        )
    rejected = sorted(
        s.context_tokens
        for s in steps
        if s.outcome is LongOutcome.REJECTED and s.context_tokens <= max_context
    )
    if rejected:
        limit = f" (server max_model_len {max_model_len})" if max_model_len else ""
        return Classification(
            Action.ADJUST_CONFIGURATION,
            f"inputs of {rejected[0]}+ tokens are rejected{limit}, below the intended "
            f"{max_context}; largest accepted {largest}",
            max_context=largest,
        )
    return Classification(
        Action.STABLE, f"every input up to {largest} tokens was served", max_context=largest
    )


@dataclass(frozen=True, slots=True)
class Trend:
    """Least-squares slope of latency over time, with a 95% confidence interval."""

    slope: float  # seconds of latency per second of run
    low: float
    high: float
    relative_growth: float  # fitted change over the run, relative to the fitted start
    points: int


# Two-sided 97.5% t quantiles for small samples; 1.96 beyond.
_T = {
    3: 12.71,
    4: 4.30,
    5: 3.18,
    6: 2.78,
    7: 2.57,
    8: 2.45,
    9: 2.36,
    10: 2.31,
    12: 2.23,
    15: 2.16,
    20: 2.10,
    30: 2.05,
}


def _t_quantile(n: int) -> float:
    for size in sorted(_T):
        if n <= size:
            return _T[size]
    return 1.96


def trend(points: Sequence[tuple[float, float]]) -> Trend | None:
    """OLS of y on t; None with fewer than 3 points or no spread in time."""
    n = len(points)
    if n < 3:
        return None
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((t - mean_t) ** 2 for t, _ in points)
    if sxx == 0:
        return None
    slope = sum((t - mean_t) * (y - mean_y) for t, y in points) / sxx
    intercept = mean_y - slope * mean_t
    residual = sum((y - intercept - slope * t) ** 2 for t, y in points)
    se = math.sqrt(residual / (n - 2) / sxx) if n > 2 else 0.0
    half = _t_quantile(n) * se
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    start = intercept + slope * t0
    growth = (slope * (t1 - t0)) / start if start > 0 else 0.0
    return Trend(slope, slope - half, slope + half, growth, n)


def classify_sustained(
    latency: Trend | None,
    window_throughput: Sequence[float],
    errors: int,
    total: int,
    engine_died: bool,
    concurrency: int,
    max_growth: float = 0.2,
    refused: int = 0,
    refused_detail: str = "",
    preemptions: float | None = None,
    max_preemptions: float = 0.0,
) -> Classification:
    """Latency rising while throughput stays flat means pressure is accumulating."""
    if engine_died:
        return Classification(
            Action.EXPAND_CAPACITY,
            f"the engine terminated under sustained load at concurrency {concurrency}",
        )
    if refused:
        return Classification(
            Action.SERVER_REFUSED,
            f"the server refused {refused}/{total} requests with HTTP 4xx ({refused_detail!r}): "
            "a configuration finding, not capacity",
        )
    if errors:
        return Classification(
            Action.EXPAND_CAPACITY,
            f"{errors}/{total} requests failed under sustained load at concurrency {concurrency}",
        )
    if total - errors < MIN_SUSTAINED_COMPLETIONS:
        return Classification(
            Action.NO_DATA,
            f"only {total - errors} request(s) completed under sustained load: too few to "
            f"judge a trend (at least {MIN_SUSTAINED_COMPLETIONS}); run longer (--duration)",
        )
    if preemptions is not None and preemptions > max_preemptions:
        return Classification(
            Action.LIMIT_TRAFFIC,
            f"the engine preempted {preemptions:g} running request(s) under sustained load at "
            f"concurrency {concurrency}: its KV cache runs out",
            ceiling=max(1, concurrency // 2),
        )
    if latency is not None and latency.low > 0 and latency.relative_growth > max_growth:
        flat = _flat(window_throughput)
        shape = "while throughput stayed flat" if flat else "and throughput moved too"
        return Classification(
            Action.LIMIT_TRAFFIC,
            f"latency rose {latency.relative_growth:.0%} over the run (slope "
            f"{latency.slope:.4f} s/s, 95% CI {latency.low:.4f}..{latency.high:.4f}) {shape}",
            ceiling=max(1, concurrency // 2),
        )
    growth = (
        ""
        if latency is None
        else f" (latency trend {latency.relative_growth:+.0%}, "
        f"CI {latency.low:.4f}..{latency.high:.4f} s/s)"
    )
    return Classification(
        Action.STABLE, f"steady at concurrency {concurrency}{growth}", ceiling=concurrency
    )


def _flat(values: Sequence[float], tolerance: float = 0.15) -> bool:
    if len(values) < 2:
        return True
    mean = sum(values) / len(values)
    return mean > 0 and (max(values) - min(values)) / mean <= 2 * tolerance
