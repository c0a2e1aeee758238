"""Pure capacity analysis of the ramp steps' rows (`step_stats.py`): stability, trends and
the checklist's three actions (adjust configuration, limit traffic, expand capacity).
Table-tested, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from golive.checks.capacity.api_server import api_server_bound
from golive.checks.capacity.knee import candidate, confirmable, knee, not_reproduced
from golive.checks.capacity.step_stats import StepStats


class Action(enum.StrEnum):
    STABLE = "stable"
    ADJUST_CONFIGURATION = "adjust-configuration"  # stable; context/concurrency above envelope
    LIMIT_TRAFFIC = "limit-traffic"  # stable only under a lower, measured ceiling
    EXPAND_CAPACITY = "expand-capacity"  # OOM, collapse, stalls or restarts despite limits
    FIRST_STEP_FAILED = "first-step-failure"  # failed at the lowest load: a defect, not capacity
    NO_DATA = "no-data"  # the phase could not measure what it judges
    SERVER_REFUSED = "server-refused"  # HTTP 4xx: the server's configuration, not its capacity
    INCONSISTENT = "inconsistent-limits"  # accepted what its own limits say it must refuse
    STALLED = "engine-stalled"  # no token for capacity.stall_s with requests in flight
    CONTINUES = "failure-continues"  # failed again at the last stable step after a restart


@dataclass(frozen=True, slots=True)
class Classification:
    action: Action
    reason: str
    ceiling: int | None = None  # highest stable concurrency
    max_context: int | None = None  # largest accepted context (tokens)


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
    max_retry_share: float = 0.05  # the client's retries per request: more is a retry storm
    required_concurrency: int | None = None  # production's stated need (capacity.*)


def saturated(previous: StepStats, step: StepStats, policy: StabilityPolicy) -> str | None:
    """The knee from one window a side: the gain must fall short of the policy's by more than
    counting noise (the 95% interval of the ratio of two counts): a gain of 1.198 measured
    on 1,505 and 1,816 requests (±0.04) is not a knee at 1.2, a halving on 10 and 4 requests
    is. Repeated windows are judged with their spread (`knee.knee`)."""
    return knee([previous], [step], policy)


def held_back(
    concurrency: int, mean_waiting: float | None, max_running: float | None, policy: StabilityPolicy
) -> bool:
    """Requests waited in the engine while it ran fewer than were sent: its batch was full."""
    return (
        concurrency > 1
        and mean_waiting is not None
        and mean_waiting >= policy.max_mean_waiting
        and max_running is not None
        and max_running < concurrency
    )


def queue_limit(policy: StabilityPolicy, e2e_p50_s: float) -> float:
    """The queue time beyond which requests wait too long: judged against the work itself."""
    return max(policy.max_queue_s, policy.max_queue_share * e2e_p50_s)


def step_stable(step: StepStats, policy: StabilityPolicy) -> tuple[bool, str]:
    if step.engine_died:
        return False, f"the engine terminated at concurrency {step.concurrency}"
    total = step.completed + step.errors
    if total == 0:
        return False, f"no request finished at concurrency {step.concurrency}"
    if step.errors / total > policy.max_error_rate:
        return False, f"{step.errors}/{total} requests failed at concurrency {step.concurrency}"
    if retry_storm(step, policy):
        return False, (
            f"retry storm at concurrency {step.concurrency}: the client retried {step.retries} "
            f"time(s) for {total} requests ({step.retries / total:.0%}, above "
            f"{policy.max_retry_share:.0%}; {step.timeouts} attempt(s) timed out): the "
            "server shed load (429/503) or answered too late for the client, and only "
            "sending again got the answers"
        )
    if step.preemptions is not None and step.preemptions > policy.max_preemptions:
        return False, (
            f"the engine preempted {step.preemptions:g} running request(s) at concurrency "
            f"{step.concurrency}: its KV cache ran out"
        )
    if held_back(step.concurrency, step.mean_waiting, step.max_running, policy):
        return False, (
            f"the engine ran at most {step.max_running:g} of {step.concurrency} concurrent "
            f"requests while {step.mean_waiting:.1f} waited on average: the queue grows"
        )
    queue = step.queue_mean_s
    if queue is not None and step.e2e_p50_s:
        limit = queue_limit(policy, step.e2e_p50_s)
        if queue > limit:
            return False, (
                f"requests waited {queue:.2f} s on average in the queue at concurrency "
                f"{step.concurrency} (limit {limit:.2f} s; waiting up to {step.max_waiting:g})"
            )
    return True, f"stable at concurrency {step.concurrency}"


def classify_concurrency(
    steps: Sequence[StepStats],
    policy: StabilityPolicy,
    repeats: Mapping[int, Sequence[StepStats]] | None = None,
) -> Classification:
    """Walk the ramp: the ceiling is the last stable step before the first unstable one.
    `repeats`: windows measured again at a level around a candidate knee (`knee.py`); a
    repeat that fails makes its level unstable like the ramp's own window would."""
    again = repeats or {}

    def runs(step: StepStats) -> list[StepStats]:
        return [step, *again.get(step.concurrency, ())]

    unconfirmed: list[str] = []
    if not steps:
        return Classification(Action.NO_DATA, "no concurrency step ran")
    refused = next((s for s in steps if s.refused), None)
    if refused is not None:
        return Classification(
            Action.SERVER_REFUSED,
            refusal_reason(str(refused.refused), refused.refused_detail, refused.concurrency),
        )
    ceiling: int | None = None
    previous: StepStats | None = None
    for step in steps:
        if step.stall is not None and not step.engine_died:
            return Classification(Action.STALLED, step.stall, ceiling)
        # HTTP 5xx at the lowest load is the server's own word, judged before coverage: a
        # server that fails at once lets golive send as fast as one core can, and that
        # window's headroom is not the finding
        if ceiling is None and step.server_errors and not step.engine_died:
            total = step.completed + step.errors
            reason = (
                f"{step.server_errors}/{total} requests answered HTTP 5xx at concurrency "
                f"{step.concurrency}"
            )
            return first_step_failed(reason, step.failure_detail)
        if step.coverage is not None and not step.engine_died:
            return Classification(
                Action.NO_DATA,
                f"{step.coverage} at concurrency {step.concurrency}: that window is not judged",
                ceiling,
            )
        stable, reason = step_stable(step, policy)
        for number, repeat in enumerate(again.get(step.concurrency, ()), start=1):
            if stable:
                stable, why = step_stable(repeat, policy)
                reason = reason if stable else f"{why} (knee repeat {number})"
        if stable and not step.engine_measured and not step.engine_died:
            return Classification(
                Action.NO_DATA,
                f"the engine's queue gauges (num_requests_running/waiting) and queue-time "
                f"histogram could not be read at concurrency {step.concurrency}: stability "
                "cannot be judged without them (is --metrics-url a vLLM /metrics?)",
                ceiling,
            )
        found = knee(runs(previous), runs(step), policy) if stable and previous else None
        if stable and found is None:
            if previous is not None and (
                note := not_reproduced(runs(previous), runs(step), policy)
            ):
                unconfirmed.append(note)
            ceiling, previous = step.concurrency, step
            continue
        reason = found or reason
        if (frontend := api_server_bound(step, steps[0])) is not None:
            reason = f"{reason}; {frontend}"
        if ceiling is None and step.errors == step.cancelled > 0 and not step.engine_died:
            return Classification(Action.NO_DATA, unfinished(step.cancelled, step))
        if ceiling is None:  # no step was stable: there is no capacity to speak of yet
            return first_step_failed(reason, step.failure_detail)
        if step.engine_died:  # a lower step was stable: that is the envelope
            reason = f"{reason} after concurrency {ceiling} was stable; stable up to {ceiling}"
        else:
            reason = f"{reason}; stable up to concurrency {ceiling}"
        limit = Classification(Action.LIMIT_TRAFFIC, reason, ceiling)
        return beyond_need(limit, failure_saturation(step, policy), policy.required_concurrency)
    need = policy.required_concurrency
    if ceiling is not None and need is not None and need > ceiling:
        return Classification(  # the tested envelope ends at the ramp's top: beyond is a limit
            Action.LIMIT_TRAFFIC,
            f"stable at every step up to {ceiling}, the ramp's top; production needs {need} "
            "(capacity.required_concurrency), never tested: held to the tested envelope until "
            f"the ramp goes to {need} (--concurrency {need})",
            ceiling,
        )
    notes = "".join(f"; {note}" for note in unconfirmed)
    return Classification(Action.STABLE, f"stable at every step up to {ceiling}{notes}", ceiling)


def refusal_reason(refused: str, detail: str, concurrency: int) -> str:
    """A window's HTTP 4xx answers (`refused`: how many, e.g. "3" or "3/40"): a rate limit
    (429) or a request the server is not configured for (any other 4xx), quoting the server;
    configuration, never capacity. The ramp's steps and the sustained window say it alike."""
    if detail.startswith("HTTP 429"):
        return (
            f"the server rate-limited {refused} request(s) with HTTP 429 at concurrency "
            f"{concurrency} ({detail!r}): a rate limit in front of or in the engine, not the "
            "engine's capacity; raise the limit or keep traffic under it"
        )
    return (
        f"the server refused {refused} request(s) with HTTP 4xx at concurrency {concurrency} "
        f"({detail!r}): the workload uses something the server is not configured for; fix the "
        "request or enable it (not capacity)"
    )


def ramp_next(
    stable_so_far: Sequence[StepStats],
    step: StepStats,
    policy: StabilityPolicy,
    repeats: Mapping[int, Sequence[StepStats]],
    knee_repeats: int,
) -> str:
    """What the ramp does after `step`: "continue" up, "repeat" the two steps around a
    candidate knee (once per level), or "stop" (the ceiling is known)."""
    if (  # the first windows' figures say knee, inside counting noise or not: measure again
        knee_repeats > 1
        and stable_so_far
        and step.concurrency not in repeats
        and step_stable(step, policy)[0]
        and candidate(stable_so_far[-1], step, policy)
        and confirmable(stable_so_far[-1], step, policy, knee_repeats)
    ):
        return "repeat"
    if classify_concurrency([*stable_so_far, step], policy, repeats).ceiling == step.concurrency:
        return "continue"
    return "stop"


def unfinished(ended: int, step: StepStats) -> str:
    """A lowest step where nothing failed, but golive's window ended requests still open."""
    return (
        f"{ended} request(s) did not finish within the {step.wall_s:.0f} s window and its drain "
        f"at concurrency {step.concurrency} ({step.completed} finished; golive ended the rest): "
        "the engine hangs or is slower than the window, nothing failed (lengthen "
        "capacity.step_duration_s or capacity.duration_s)"
    )


def saturation(
    concurrency: int,
    preemptions: float | None,
    mean_waiting: float | None,
    max_running: float | None,
    policy: StabilityPolicy,
    queue_mean_s: float | None = None,
    e2e_p50_s: float | None = None,
) -> str | None:
    """The engine's own evidence that it ran out of room (None: it showed none): requests
    preempted (its KV cache ran out), or requests held waiting while it ran fewer than were
    sent (its batch was full: the ramp's own rule for a growing queue). Waiting beside a
    batch that held every request is the scheduler's rhythm, not exhaustion."""
    if preemptions is not None and preemptions > policy.max_preemptions:
        return f"the engine preempted {preemptions:g} running request(s) (KV cache exhausted)"
    if held_back(concurrency, mean_waiting, max_running, policy):
        return (
            f"the engine ran at most {max_running:g} of {concurrency} requests while "
            f"{mean_waiting:.1f} waited on average"
        )
    if queue_mean_s is not None and e2e_p50_s and queue_mean_s > queue_limit(policy, e2e_p50_s):
        return f"requests waited {queue_mean_s:.2f} s on average in the engine's queue"
    return None


# the engine's own words for running out of memory, in an answer, a failure or its death
# (CUDA's "out of memory", torch's OutOfMemoryError, a bare "OOM" as in "OOM killed")
OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemoryError|\bOOM\b", re.IGNORECASE)


def shed_load(retries: int, requests: int, max_share: float) -> bool:
    """The client retried more than `max_share` of its requests: the server shed load
    (429/503) or answered too late. A limit in front of the engine, never capacity to buy."""
    return retries > max_share * requests


def retry_storm(step: StepStats, policy: StabilityPolicy) -> bool:
    return shed_load(step.retries, step.completed + step.errors, policy.max_retry_share)


def failure_saturation(step: StepStats, policy: StabilityPolicy) -> str | None:
    """The engine's own evidence where a ramp step failed: its gauges (`step_saturation`) or
    a failure that says the memory ran out. A step that failed only by the client retrying
    shed load shows none: shedding is a limit in front of the engine (a rate limit, a
    gateway's queue), and the engine's queue beside it is what the shedding protects."""
    if retry_storm(step, policy) and step.errors == 0 and not step.engine_died:
        return None
    if OUT_OF_MEMORY.search(step.failure_detail):
        return f"the engine ran out of memory ({step.failure_detail})"
    return step_saturation(step, policy)


def step_saturation(step: StepStats, policy: StabilityPolicy) -> str | None:
    return saturation(
        step.concurrency,
        step.preemptions,
        step.mean_waiting,
        step.max_running,
        policy,
        step.queue_mean_s,
        step.e2e_p50_s,
    )


def beyond_need(
    limit: Classification, saturated_by: str | None, required: int | None
) -> Classification:
    """A ceiling is a limit to observe; it is a capacity to buy only when production's
    stated need is above it and the engine's own gauges show it saturated there (a failure
    without that evidence is not put on capacity)."""
    if limit.ceiling is None or required is None or required <= limit.ceiling:
        return limit
    if saturated_by is None:
        return dataclasses.replace(
            limit,
            reason=f"{limit.reason}; production needs {required} "
            "(capacity.required_concurrency), but the engine showed no saturation (no "
            "preemption, no waiting queue): not put on capacity until the failure is explained",
        )
    return Classification(
        Action.EXPAND_CAPACITY,
        f"{limit.reason}; production needs {required} (capacity.required_concurrency) and "
        f"the engine saturated: {saturated_by}",
        limit.ceiling,
    )


def first_step_failed(reason: str, detail: str = "") -> Classification:
    """Failures at the lowest load of a ladder (concurrency 1, the smallest input, the
    ramp's first step): a software or configuration defect, or a deployment that cannot
    serve one request; never a capacity ceiling to buy GPUs for (`hold`)."""
    quoted = f" ({detail})" if detail else ""
    return Classification(
        Action.FIRST_STEP_FAILED,
        f"{reason}{quoted}, the lowest load of the ladder: a software or configuration defect "
        "to fix before capacity can be judged, not a capacity limit",
    )
