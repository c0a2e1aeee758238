"""Pure judgement of the long-input ladder: which inputs were served, rejected for their
length, refused or broke the engine, and what that means against the context production
needs (`capacity.required_context`). Table-tested, no I/O.

The checklist: "Adjust configuration: the environment remains stable, but context or
concurrency is clearly above the intended service envelope"; "Expand capacity: OOM or queue
collapse continues after reasonable context and concurrency controls". A context the server
refuses by its own `max_model_len` is configuration; an input that broke the engine is put on
capacity only where production needs that context and the engine showed it ran out of memory
(`context_saturation`); otherwise the envelope is the largest input served.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.checks.capacity.rules import (
    OUT_OF_MEMORY,
    Action,
    Classification,
    first_step_failed,
)


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
    steps: Sequence[LongStep],
    max_context: int,
    max_model_len: int | None,
    required: int | None = None,
    saturated_by: str | None = None,
) -> Classification:
    """Long inputs up to `max_context` must be served; above the server's limit, refused.
    `required`: the context production needs; `saturated_by`: the engine's own evidence that
    an input broke it by running out of memory (None: it showed none)."""
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
    beyond = [
        s
        for s in steps
        if max_model_len is not None
        and s.context_tokens > max_model_len
        and s.outcome in (LongOutcome.FAILED, LongOutcome.DIED)
    ]
    if beyond:
        what = "killed the engine" if beyond[0].outcome is LongOutcome.DIED else "failed"
        return Classification(
            Action.INCONSISTENT,
            f"an input of {beyond[0].context_tokens} tokens, above the server's max_model_len "
            f"{max_model_len}, {what} ({beyond[0].detail!r}) instead of being refused with HTTP "
            "400: the engine does not enforce its own limit, so a client's overlong request "
            "is a failure in production",
            max_context=largest,
        )
    broke = broken_step(steps, max_context)
    if broke is not None:
        reason = (
            f"the engine died serving a {broke.context_tokens}-token input: {broke.detail}"
            if broke.outcome is LongOutcome.DIED
            else f"a {broke.context_tokens}-token input failed: {broke.detail}"
        )
        served = [c for c in accepted if c < broke.context_tokens]
        if not served:
            return first_step_failed(reason)
        envelope = Classification(
            Action.ADJUST_CONFIGURATION,
            f"{reason}; inputs up to {max(served)} tokens were served: the context envelope "
            f"is {max(served)} tokens until this failure is explained",
            max_context=max(served),
        )
        later = [c for c in accepted if c > broke.context_tokens]
        return broken_beyond_need(envelope, required, saturated_by, max_model_len, later)
    refused_for_length = sorted(
        s.context_tokens for s in steps if s.outcome is LongOutcome.REJECTED
    )
    rejected = [c for c in refused_for_length if c <= max_context]
    if rejected:
        limit = f" (server max_model_len {max_model_len})" if max_model_len else ""
        envelope = Classification(
            Action.ADJUST_CONFIGURATION,
            f"inputs of {rejected[0]}+ tokens are rejected{limit}, below the intended "
            f"{max_context}; largest accepted {largest}",
            max_context=largest,
        )
    else:
        envelope = Classification(
            Action.STABLE, f"every input up to {largest} tokens was served", max_context=largest
        )
    return served_beyond_need(envelope, required, max_context, max_model_len, refused_for_length)


def broken_step(steps: Sequence[LongStep], max_context: int) -> LongStep | None:
    """The smallest input that killed the engine or failed inside the envelope (None: none)."""
    broke = [
        s
        for s in steps
        if s.outcome is LongOutcome.DIED
        or (s.outcome is LongOutcome.FAILED and s.context_tokens <= max_context)
    ]
    return min(broke, key=lambda s: s.context_tokens) if broke else None


def _need(required: int) -> str:
    return f"production needs {required} tokens (capacity.required_context)"


def broken_beyond_need(
    envelope: Classification,
    required: int | None,
    saturated_by: str | None,
    max_model_len: int | None,
    later: Sequence[int],
) -> Classification:
    """An input broke the engine above the envelope: capacity to buy only where production
    needs more than the envelope, the server is configured for it (max_model_len), no larger
    input was served after it, and the engine ran out of memory; a limit otherwise."""
    served = envelope.max_context
    if required is None or served is None or required <= served:
        return envelope
    why = None
    if max_model_len is not None and required > max_model_len:
        why = (
            f"above the server's max_model_len {max_model_len}: raise --max-model-len first "
            "(configuration)"
        )
    elif later:
        why = (
            f"but a larger input ({max(later)} tokens) was served after it: the failure is not "
            "the memory's size; not put on capacity until it is explained"
        )
    elif saturated_by is None:
        why = (
            "but the engine showed no sign of running out of memory (no out-of-memory "
            "message, no preemption): not put on capacity until the failure is explained"
        )
    if why is not None:
        return dataclasses.replace(envelope, reason=f"{envelope.reason}; {_need(required)}, {why}")
    return Classification(
        Action.EXPAND_CAPACITY,
        f"{envelope.reason}; {_need(required)} and the engine ran out of memory: {saturated_by}",
        max_context=served,
    )


def top_step(max_context: int, max_model_len: int | None) -> int:
    """The ladder's top: the intended context, but a request of exactly max_model_len sits on
    the server's own edge (vLLM 0.24 on H200 refused prompt 8,184 + 8 generated at 8,192), so
    at the server's limit the top step keeps 1% (at least 16 tokens) below it; the step above
    max_model_len checks the refusal."""
    if max_model_len is None:
        return max_context
    return min(max_context, max_model_len - max(16, max_model_len // 100))


def served_beyond_need(
    envelope: Classification,
    required: int | None,
    max_context: int,
    max_model_len: int | None,
    rejected: Sequence[int] = (),
) -> Classification:
    """Nothing broke: a need above what was served is configuration (the server's own
    max_model_len, or its rejection for length) or was never asked (the ladder stopped below
    it) — a limit at the largest input served, never capacity. A need at the server's own
    edge is met by the ladder's top step, which keeps 1% below it (`top_step`)."""
    served = envelope.max_context
    if required is None or served is None or required <= served:
        return envelope
    inside = max_model_len is None or required <= max_model_len
    if inside and required <= max_context and served >= top_step(required, max_model_len):
        return envelope  # the ladder asked as close to the need as the server's edge allows
    if max_model_len is not None and required > max_model_len:
        why = (
            f"{_need(required)}, above the server's max_model_len {max_model_len}: raise "
            "--max-model-len (vLLM says at start if its KV cache cannot hold it) and run again"
        )
    elif refused_at := [r for r in rejected if r <= required]:
        why = (
            f"{_need(required)}, but the server rejects inputs of {refused_at[0]} tokens for "
            "their length: its context limit (--max-model-len, or the generation limit a "
            "request adds) is below the need"
        )
    else:
        why = (
            f"{_need(required)}, never asked: the ladder went to {max_context} "
            f"(capacity.max_context); held to {served} tokens until it goes to {required} "
            f"(--max-context {required})"
        )
    return Classification(
        Action.ADJUST_CONFIGURATION, f"{envelope.reason}; {why}", max_context=served
    )


def context_saturation(
    steps: Sequence[LongStep], max_context: int, death: Mapping[str, Any] | None
) -> str | None:
    """The engine's own evidence that the input which broke it ran it out of memory (None:
    it showed none): its answer or death says out of memory, or — for a death in the ladder —
    the memory curve before it shows requests preempted (one request at a time: only a KV
    cache too small for it preempts). A KV cache near full is not evidence here: the largest
    input served before the death fills it by design where max_model_len is near its size."""
    broke = broken_step(steps, max_context)
    if broke is None:
        return None
    if OUT_OF_MEMORY.search(broke.detail):
        return f"the server's answer to the {broke.context_tokens}-token input: {broke.detail!r}"
    if broke.outcome is not LongOutcome.DIED or death is None:
        return None
    if death.get("phase") != "long_input":
        return None
    if OUT_OF_MEMORY.search(str(death.get("reason") or "")):
        return f"the engine's death: {death.get('reason')!r}"
    rows = death.get("preceding_memory_curve")
    rows = (
        [r for r in rows if isinstance(r, Mapping) and r.get("phase") == "long_input"]
        if isinstance(rows, list)
        else []
    )
    preempted = _rise(rows, "num_preemptions")
    if preempted:
        return (
            f"the engine preempted {preempted:g} request(s) before it died "
            "(memory/termination.json)"
        )
    return None


def _values(rows: Sequence[Mapping[str, Any]], column: str) -> list[float]:
    return [
        float(v)
        for r in rows
        if isinstance(v := r.get(column), int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
    ]


def _rise(rows: Sequence[Mapping[str, Any]], column: str) -> float:
    values = _values(rows, column)
    return max(0.0, values[-1] - values[0]) if len(values) > 1 else 0.0
