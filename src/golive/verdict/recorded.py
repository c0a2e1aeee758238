"""A check's measurements as verdict.json records them, and back: the typed classification,
skip reason and limits of a `CheckResult` are written among the measurements under the keys
(and at the places) golive has always written them, so the file and every sealed bundle read
as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from golive.checks.coverage import GAPS
from golive.evidence.runtime_log import LOGGED_ERRORS
from golive.results import CheckLimits, CheckResult, Classification, SkipReason

Measurement = float | int | str | bool | None

# verdict.json keeps a check's typed classification and skip reason among its measurements
CLASSIFICATION = "classification"
SKIP_REASON = "skip_reason"

# verdict.json keeps a check's typed limits among its measurements, under these names
_LIMIT_KEYS = (
    ("max_concurrency", "limit_max_concurrency"),
    ("max_context", "limit_max_context"),
    ("disable_feature", "limit_disable_feature"),
)
# measurements a later stage adds to a judged check (`runtime_log.with_logged_errors`):
# written after the limits, as they were added after them
_ADDED_LATER = (LOGGED_ERRORS,)


def recorded_measurements(result: CheckResult) -> dict[str, Measurement]:
    """A check's measurements as verdict.json holds them: its typed classification, skip reason
    and limits written back under their keys, each where its producer put it (a capacity
    phase's classification first, a config skip's reason first, a coverage gap's both before
    its `gaps`, an Agent feature's classification last; the limits after the check's own
    measurements), so that the file reads as it always has."""
    items = list(result.measurements.items())
    late: list[tuple[str, Measurement]] = []
    while items and items[-1][0] in _ADDED_LATER:
        late.insert(0, items.pop())
    head: list[tuple[str, Measurement]] = []
    tail: list[tuple[str, Measurement]] = []
    c = result.classification
    typed = [(CLASSIFICATION, c.value)] if c is not None else []
    if result.skip_reason is not None:
        typed.append((SKIP_REASON, result.skip_reason.value))
    if c is Classification.PROGRAMME_INCOMPLETE:
        at = next((i for i, (k, _) in enumerate(items) if k == GAPS), len(items))
        items[at:at] = typed
    elif c is Classification.LIMIT_FEATURE:
        tail += typed
    else:
        head += typed
    for name, key in _LIMIT_KEYS:
        value = getattr(result.limits, name)
        if value is not None:
            tail.append((key, value))
    return dict(head + items + tail + late)


_CLASSIFICATIONS = frozenset(c.value for c in Classification)
_SKIP_REASONS = frozenset(r.value for r in SkipReason)


def _classification(measurements: dict[str, Measurement]) -> Classification | None:
    """The check's classification, taken out of its recorded measurements (a value golive
    does not write stays a plain measurement, which no rule reads)."""
    value = measurements.get(CLASSIFICATION)
    if not isinstance(value, str) or value not in _CLASSIFICATIONS:
        return None
    del measurements[CLASSIFICATION]
    return Classification(value)


def _skip_reason(measurements: dict[str, Measurement]) -> SkipReason | None:
    """Why the check was skipped on purpose, taken out of its recorded measurements."""
    value = measurements.get(SKIP_REASON)
    if not isinstance(value, str) or value not in _SKIP_REASONS:
        return None
    del measurements[SKIP_REASON]
    return SkipReason(value)


def _limits(measurements: dict[str, Measurement]) -> CheckLimits:
    """The check's limits, taken out of its recorded measurements (a value of a type golive
    does not write stays a plain measurement, which no rule reads)."""

    def take(key: str, kind: type[int] | type[str]) -> Any:
        value = measurements.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return None
        del measurements[key]
        return value

    return CheckLimits(
        max_concurrency=take("limit_max_concurrency", int),
        max_context=take("limit_max_context", int),
        disable_feature=take("limit_disable_feature", str),
    )


@dataclass(frozen=True, slots=True)
class Typed:
    """A check's recorded measurements split into its own and its typed fields."""

    measurements: dict[str, Measurement]
    classification: Classification | None
    limits: CheckLimits
    skip_reason: SkipReason | None


def typed_measurements(recorded: Mapping[str, Measurement]) -> Typed:
    """A check's recorded measurements split into its own and its typed fields."""
    measurements = dict(recorded)
    classification = _classification(measurements)
    skip_reason = _skip_reason(measurements)
    return Typed(measurements, classification, _limits(measurements), skip_reason)
