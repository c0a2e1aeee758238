"""The capacity phases' figures that later stages read (the decision, the tested envelope,
the coverage check, the capacity request, the report, guardrails): each one's measurement key,
which the phase's judge writes under (`judge.judge_ramp`, `judge.judge_sustained`,
`collect.classified`), and the typed accessor every reader goes through. The accessors take
the measurements alone, so a `CheckResult` and a verdict.json entry read alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from golive.results import measured_float, measured_int, measured_number

CEILING = "ceiling"  # capacity.concurrency: the ramp's highest stable step
DURATION_S = "duration_s"  # capacity.sustained: the window's length, from its records
COMPLETED = "completed"  # capacity.sustained: the requests it answered
CAPACITY_CEILING = "capacity_ceiling"  # an expand-capacity phase: what a request sizes from


def ramp_ceiling(measurements: Mapping[str, object]) -> int | None:
    """`capacity.concurrency`'s ceiling (None: no stable step, or no ramp)."""
    return measured_int(measurements.get(CEILING))


@dataclass(frozen=True, slots=True)
class SustainedWindow:
    """What `capacity.sustained` measured of its window (None: not measured)."""

    duration_s: float | None  # as written: an int where the judge wrote one
    completed: int | None


def sustained_window(measurements: Mapping[str, object]) -> SustainedWindow:
    """`capacity.sustained`'s window length and answers."""
    return SustainedWindow(
        measured_number(measurements.get(DURATION_S)), measured_int(measurements.get(COMPLETED))
    )


def capacity_ceiling(measurements: Mapping[str, object]) -> float | None:
    """The concurrency an expand-capacity phase found the deployment held to (None: the
    phase set none)."""
    return measured_float(measurements.get(CAPACITY_CEILING))
