"""`capacity.long_input` judged from the bundle alone: the ladder of context sizes the
collector saved (`metrics/capacity-ladder.json`), held to its request records. The run calls
it on the bundle it is writing; `golive decide` calls it again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from golive.bundle.layout import (
    CAPACITY_LADDER,
    CAPACITY_LONG_INPUT_REQUESTS,
    MEMORY_CURVE,
    TERMINATION,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import classified
from golive.checks.capacity.context_rules import (
    LongOutcome,
    LongStep,
    classify_long_input,
    context_saturation,
)
from golive.checks.capacity.deaths import unshown_deaths
from golive.checks.capacity.judge import after_death
from golive.checks.capacity.recorded import ladder_differences
from golive.checks.capacity.window_evidence import not_from_records
from golive.config import CapacityConfig
from golive.results import CAPACITY_RESULT, CheckResult, Status

STEP = "step_"  # capacity.long_input's `step_<tokens>`: how the ladder's step at it ended


def judge_long_input(evidence: BundleReader, config: CapacityConfig) -> CheckResult:
    """`capacity.long_input` from the ladder the collector saved: each context size and how
    the server answered it (served, rejected for its length, refused, failed, died), against
    the context production needs (`capacity.required_context`)."""
    ladder = evidence.json(CAPACITY_LADDER)
    if not isinstance(ladder, Mapping):
        return after_death(evidence, "capacity.long_input") or CAPACITY_RESULT(
            "capacity.long_input",
            Status.NO_DATA,
            f"no long-input ladder ({CAPACITY_LADDER})",
        )
    saved = ladder.get("steps") or ()
    records = evidence.records(CAPACITY_LONG_INPUT_REQUESTS)
    mismatch = ladder_differences(saved, records, CAPACITY_LADDER) + unshown_deaths(evidence)
    if mismatch:
        return not_from_records("capacity.long_input", mismatch, CAPACITY_LADDER)
    steps = [
        LongStep(
            int(row["context_tokens"]),
            LongOutcome(row["outcome"]),
            str(row.get("detail") or ""),
            row.get("prompt_tokens"),
        )
        for row in saved
    ]
    max_context = int(ladder["max_context"])
    max_model_len = ladder.get("max_model_len")
    death = evidence.json(TERMINATION)
    saturated_by = context_saturation(
        steps, max_context, death if isinstance(death, Mapping) else None
    )
    required = config.required_context
    result = classify_long_input(steps, max_context, max_model_len, required, saturated_by)
    measurements: dict[str, Any] = {
        "max_context": max_context,
        "max_model_len": max_model_len,
        "top_step": ladder.get("top_step"),
        "tokens_per_word": round(float(ladder["tokens_per_word"]), 3),
        "calibration": ladder.get("calibration"),
        "generation_limit": ladder.get("generation_limit"),
        "sampling": "temperature=0",
        "recovered_after_rejections": ladder.get("recovered_after_rejections"),
        **{f"{STEP}{s.context_tokens}": s.outcome.value for s in steps},
        **{
            f"prompt_tokens_{s.context_tokens}": s.prompt_tokens
            for s in steps
            if s.prompt_tokens is not None
        },
    }
    if required is not None:  # (bundles sealed before the key carry neither)
        measurements["required_context"] = required
    if saturated_by is not None:
        measurements["out_of_memory"] = saturated_by
    return classified(
        "capacity.long_input",
        result,
        measurements,
        (CAPACITY_LONG_INPUT_REQUESTS, CAPACITY_LADDER, MEMORY_CURVE)
        + ((TERMINATION,) if saturated_by and isinstance(death, Mapping) else ()),
    )


def served_context(measurements: Mapping[str, object]) -> int | None:
    """The longest input the long-input ladder saw served (`step_<tokens>: accepted`), not the
    context it was asked to reach."""
    served = [
        int(key.removeprefix(STEP))
        for key, value in measurements.items()
        if key.startswith(STEP)
        and key.removeprefix(STEP).isdigit()
        and value == LongOutcome.ACCEPTED.value
    ]
    return max(served, default=None)
