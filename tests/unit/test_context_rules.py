"""The long-input ladder against the context production needs (`capacity.required_context`,
issue 28 §1): capacity is blamed only where an input the team needs ran the engine out of
memory after smaller ones were served; a need the server refuses by its own max_model_len, or
one the ladder never asked, is a context limit; no need stated leaves the ladder's own
judgement unchanged.

Checklist: "Adjust configuration: The environment remains stable, but context or concurrency
is clearly above the intended service envelope." / "Expand capacity: OOM or queue collapse
continues after reasonable context and concurrency controls."
"""

from __future__ import annotations

from typing import Any

import pytest

from golive.checks.capacity.context_rules import (
    LongOutcome,
    LongStep,
    classify_long_input,
    context_saturation,
)
from golive.checks.capacity.rules import Action

OOM = "CUDA out of memory. Tried to allocate 3.00 GiB"
A, R, F, D, X = (
    LongOutcome.ACCEPTED,
    LongOutcome.REJECTED,
    LongOutcome.FAILED,
    LongOutcome.DIED,
    LongOutcome.REFUSED,
)


def ladder(*steps: tuple[int, LongOutcome, str]) -> list[LongStep]:
    return [LongStep(tokens, outcome, detail) for tokens, outcome, detail in steps]


SERVED_ALL = ladder((1024, A, ""), (2048, A, ""), (4000, A, ""), (4160, R, "maximum context"))
OOM_AT_4K = ladder((1024, A, ""), (2048, A, ""), (4000, D, OOM))
RESET_AT_4K = ladder((1024, A, ""), (2048, A, ""), (4000, D, "connection reset"))


@pytest.mark.parametrize(
    ("steps", "max_context", "need", "action", "served", "words"),
    [
        # no need stated: the ladder's own judgement, as before the key
        (SERVED_ALL, 4096, None, Action.STABLE, 4000, "every input up to 4000"),
        (OOM_AT_4K, 4096, None, Action.ADJUST_CONFIGURATION, 2048, "until this failure"),
        # the need is inside what was served
        (SERVED_ALL, 4096, 4000, Action.STABLE, 4000, "every input up to 4000"),
        (OOM_AT_4K, 4096, 2048, Action.ADJUST_CONFIGURATION, 2048, "until this failure"),
        # out of memory below the need: capacity
        (OOM_AT_4K, 4096, 4000, Action.EXPAND_CAPACITY, 2048, "ran out of memory: the server"),
        # died below the need with no sign of memory: a limit, explained as such
        (RESET_AT_4K, 4096, 4000, Action.ADJUST_CONFIGURATION, 2048, "no sign of running out"),
        # the need is above the server's max_model_len: configuration, never capacity
        (SERVED_ALL, 4096, 8192, Action.ADJUST_CONFIGURATION, 4000, "raise --max-model-len"),
        # the ladder was capped below the need the server could take: never asked
        (SERVED_ALL[:2], 2048, 4000, Action.ADJUST_CONFIGURATION, 2048, "never asked"),
        # the top step at the server's edge does not meet a need above max_model_len (the
        # real one-sequence server: 496 of 512 served, 1,024 needed)
        (
            ladder((2048, A, ""), (4056, A, ""), (4160, R, "maximum context")),
            8192,
            8192,
            Action.ADJUST_CONFIGURATION,
            4056,
            "raise --max-model-len",
        ),
        # a need at the server's own edge is met by the top step 1% below it (4056 of 4096)
        (ladder((2048, A, ""), (4056, A, "")), 4096, 4096, Action.STABLE, 4056, "every input"),
        # the need was asked and rejected for its length: not "never asked"
        (
            ladder((1024, A, ""), (2048, R, "maximum context")),
            4096,
            2048,
            Action.ADJUST_CONFIGURATION,
            1024,
            "rejects inputs of 2048 tokens",
        ),
        # out of memory at 2,048, then 4,000 served: not the memory's size
        (
            ladder((1024, A, ""), (2048, F, OOM), (4000, A, "")),
            4096,
            4000,
            Action.ADJUST_CONFIGURATION,
            1024,
            "a larger input (4000 tokens) was served after it",
        ),
        # out of memory, but the need is above max_model_len: configuration first
        (OOM_AT_4K, 4096, 100_000, Action.ADJUST_CONFIGURATION, 2048, "raise --max-model-len"),
        # the probe above max_model_len must be refused: a failure or death there is a defect
        (
            ladder((1024, A, ""), (4000, A, ""), (4160, F, "HTTP 500: Internal Server Error")),
            4096,
            None,
            Action.INCONSISTENT,
            4000,
            "instead of being refused",
        ),
        (
            ladder((1024, A, ""), (4000, A, ""), (4160, D, OOM)),
            4096,
            4000,
            Action.INCONSISTENT,
            4000,
            "killed the engine",
        ),
        # out of memory at the smallest input: a defect, whatever is needed
        (ladder((1024, D, OOM)), 4096, 4000, Action.FIRST_STEP_FAILED, None, "lowest load"),
        # a 4xx refusal is the server's configuration, first
        (ladder((1024, A, ""), (2048, X, "HTTP 400")), 4096, 4000, Action.SERVER_REFUSED, 1024, ""),
    ],
)
def test_context_need(
    steps: list[LongStep],
    max_context: int,
    need: int | None,
    action: Action,
    served: int | None,
    words: str,
) -> None:
    """What the ladder and the stated need decide, with the envelope it sets and its words."""
    oom = context_saturation(steps, max_context, None)
    result = classify_long_input(steps, max_context, 4096, need, oom)
    assert result.action is action, result.reason
    assert result.max_context == served
    assert words in result.reason


def _death(**row: Any) -> dict[str, Any]:
    return {
        "phase": "long_input",
        "reason": "/health failed after a lost connection",
        "preceding_memory_curve": [
            {"t_s": 1.0, "phase": "long_input", "kv_cache_usage_perc": 0.10, "num_preemptions": 0},
            {"t_s": 1.2, "phase": "long_input", **row},
        ],
    }


@pytest.mark.parametrize(
    ("death", "found"),
    [
        (_death(kv_cache_usage_perc=0.50, num_preemptions=3), "preempted 3"),
        (_death(kv_cache_usage_perc=0.50, num_preemptions=0), None),
        # a KV cache near full is what the largest input served does where max_model_len is
        # near the cache's size: not evidence about the input that died
        (_death(kv_cache_usage_perc=0.97, num_preemptions=0), None),
        # the curve before the ladder (another phase) says nothing about the input
        ({**_death(num_preemptions=5), "phase": "concurrency"}, None),
        (None, None),
        # a counter the exporter got wrong (text, NaN) is no preemption
        (_death(num_preemptions="many"), None),
        (_death(num_preemptions=float("nan")), None),
        (
            {"phase": "long_input", "reason": "engine OOM-killed", "preceding_memory_curve": 3},
            "OOM",
        ),
    ],
)
def test_a_death_in_the_ladder_shows_memory_run_out(
    death: dict[str, Any] | None, found: str | None
) -> None:
    """A death without an out-of-memory answer is put on memory only by the termination
    record: requests preempted in the ladder's own samples (one input at a time: only a KV
    cache too small for it preempts)."""
    said = context_saturation(RESET_AT_4K, 4096, death)
    if found is None:
        assert said is None
    else:
        assert said is not None
        assert found in said


def test_a_failed_answer_saying_out_of_memory_is_the_evidence_without_a_death() -> None:
    """HTTP 500 whose message says CUDA out of memory (the engine lived on) names it."""
    steps = ladder((1024, A, ""), (4000, F, f"HTTP 500: {OOM}"))
    said = context_saturation(steps, 4096, None)
    assert said is not None
    assert "4000-token input" in said
    assert "out of memory" in said
    result = classify_long_input(steps, 4096, 4096, 4000, said)
    assert result.action is Action.EXPAND_CAPACITY
    assert result.max_context == 1024
