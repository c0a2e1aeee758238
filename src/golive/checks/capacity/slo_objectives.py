"""Each SLO at one load window (issue 31 §1): a latency target is met when the window's p95
is within it with 95% confidence (the p95's distribution-free upper bound,
`golive.quantiles`), missed when its lower bound is beyond it, and unproven in between (too
few answers to tell); the per-user decode speed likewise at its 5th percentile; the error
rate on its count. Pure."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from golive.checks.capacity.latency_set import WindowLatency
from golive.quantiles import (
    CONFIDENCE,
    bound_levels,
    lower_bound,
    percentile,
    quantile,
    rate_bounds,
    samples_needed,
)
from golive.slo_config import SloConfig

LATENCY_TARGETS = (
    ("ttft_p95_ms", "ttft", "TTFT"),
    ("itl_p95_ms", "itl", "ITL"),
    ("e2e_p95_ms", "e2el", "end-to-end"),
)


class State(enum.StrEnum):
    MET = "met"
    MISSED = "missed"
    UNPROVEN = "unproven"  # not shown either way: too few samples, or figures missing


@dataclass(frozen=True, slots=True)
class Objective:
    """One SLO at one load: the target, what was measured, and whether it holds."""

    name: str  # the config key
    target: float
    measured: float | None
    samples: int
    state: State
    why: str
    within: bool = False  # the measured figure itself is within the target

    def to_json(self) -> dict[str, Any]:
        return {
            "slo": self.name,
            "target": self.target,
            "measured": None if self.measured is None else round(self.measured, 4),
            "samples": self.samples,
            "state": self.state.value,
            "why": self.why,
        }


def _bounds(values: list[float], independent: int) -> tuple[float | None, float | None]:
    """95% lower and upper bounds of the p95 of `values`, as if only `independent` of them
    were independent samples (pooled token gaps: an answer's gaps move together), by the
    order statistics of that many mapped onto the pooled values."""
    if independent >= len(values):
        return lower_bound(values, 95), quantile(values, 95).upper
    low, high = bound_levels(independent, 95)
    return (
        None if low is None else percentile(values, low),
        None if high is None else percentile(values, high),
    )


def _judged(
    target: float, values: list[float], said: str, sign: int, independent: int
) -> tuple[State, str]:
    """Whether the p95 of `values` (sign 1) is within `target`, or the p5 above it (sign -1,
    the values negated), with 95% confidence either way: met when its upper bound is within
    the target, missed when its lower bound is beyond it, else unproven."""
    lower, upper = _bounds(values, independent)
    limit = sign * target
    if lower is not None and lower > limit:
        return State.MISSED, f"{said} misses {target:g} (95% bound {sign * lower:.1f})"
    if upper is not None and upper <= limit:
        return State.MET, f"{said} meets {target:g} (95% bound {sign * upper:.1f})"
    need = "" if upper is not None else f"; a bound needs {samples_needed(95)}"
    return State.UNPROVEN, f"{said}: not shown to meet {target:g} or to miss it{need}"


def _lacking(
    window: WindowLatency, key: str, metric: str, label: str, target: float
) -> Objective | None:
    """Unproven where answers' records do not say the figure: their sample would leave out
    exactly the answers it cannot see (a record edited to drop a slow one)."""
    lacking = window.lacking(metric)
    if not lacking:
        return None
    why = f"{lacking} of {window.completed} answers' records do not say their {label}"
    return Objective(key, target, None, window.completed, State.UNPROVEN, why)


def _latency(window: WindowLatency, key: str, metric: str, label: str, target: float) -> Objective:
    lacking = _lacking(window, key, metric, label, target)
    if lacking is not None:
        return lacking
    values = window.values(metric)
    p95 = percentile(values, 95)
    if p95 is None:
        return Objective(key, target, None, 0, State.UNPROVEN, f"no {label} was measured")
    said = f"{label} p95 {p95:.1f} ms of {len(values)} samples"
    # token gaps are as independent as the answers they come from, no more
    independent = sum(1 for a in window.answers if a.gaps_ms) if metric == "itl" else len(values)
    if independent < len(values):
        said += f" ({independent} answers)"
    state, why = _judged(target, values, said, 1, independent)
    return Objective(key, target, p95, len(values), state, why, p95 <= target)


def _speed(window: WindowLatency, floor: float) -> Objective:
    key = "min_output_tokens_per_s_per_user"
    lacking = _lacking(window, key, "tpot", "decode speed", floor)
    if lacking is not None:
        return lacking
    speeds = [s for a in window.answers if (s := a.tokens_per_s) is not None]
    p5 = percentile(speeds, 5)
    if p5 is None:
        return Objective(key, floor, None, 0, State.UNPROVEN, "no answer's decode speed measured")
    said = f"p5 decode speed {p5:.1f} tokens/s of {len(speeds)} answers"
    # the 5th percentile's bounds are the 95th's of the negated speeds
    state, why = _judged(floor, [-v for v in speeds], said, -1, len(speeds))
    return Objective(key, floor, p5, len(speeds), state, why, p5 >= floor)


def _errors(window: WindowLatency, target: float) -> Objective:
    """The error rate with its one-sided 95% Clopper-Pearson bounds either way."""
    if not window.requests:
        return Objective("error_rate", target, None, 0, State.UNPROVEN, "no requests")
    failed, sent = window.requests - window.completed, window.requests
    rate = failed / sent
    lower, upper = rate_bounds(failed, sent)
    said = f"{failed}/{sent} failed ({rate:.1%})"
    if lower > target:
        state, why = State.MISSED, f"{said} misses {target:.1%} (95% bound {lower:.2%})"
    elif upper <= target:
        state, why = State.MET, f"{said} meets {target:.1%} (95% bound {upper:.2%})"
    else:
        bounds = f"95% bounds {lower:.2%}..{upper:.2%}"
        state, why = (
            State.UNPROVEN,
            f"{said}: not shown to meet {target:.1%} or to miss it ({bounds})",
        )
    return Objective("error_rate", target, rate, sent, state, why, rate <= target)


def objectives(window: WindowLatency, slo: SloConfig) -> list[Objective]:
    """Every stated objective at one window (or one load's windows pooled)."""
    found = [
        _latency(window, key, metric, label, target)
        for key, metric, label in LATENCY_TARGETS
        if (target := getattr(slo, key)) is not None
    ]
    if slo.error_rate is not None:
        found.append(_errors(window, slo.error_rate))
    if slo.min_output_tokens_per_s_per_user is not None:
        found.append(_speed(window, slo.min_output_tokens_per_s_per_user))
    return found


def answers_needed(slo: SloConfig) -> int:
    """The answers one load level needs for every stated objective to be shown met, with
    none failing: 59 for a p95 (or the decode speed's p5) at 95% confidence, and for an error
    rate r the n with (1 - r)^n <= 5% (29 for 10%); 0 where nothing is stated (or only an
    error rate of 0, which no count shows)."""
    percentiles = [key for key, *_ in LATENCY_TARGETS] + ["min_output_tokens_per_s_per_user"]
    needs = [samples_needed(95)] if any(getattr(slo, k) is not None for k in percentiles) else []
    if slo.error_rate is not None and 0 < slo.error_rate < 1:
        needs.append(math.ceil(math.log(1 - CONFIDENCE) / math.log1p(-slo.error_rate)))
    return max(needs, default=0)


def sustained_answers(slo: SloConfig, ramp_answers: int, minimum: int) -> int:
    """The answers the sustained window at one level should hold: `minimum` (the config's
    floor), or what the stated SLOs need less those the ramp's step at that level answered
    (`capacity.slo` pools the two), whichever is more."""
    return max(minimum, answers_needed(slo) - ramp_answers)


def step_state(found: Sequence[Objective]) -> State:
    """A window's state: missed if any objective missed, else unproven if any is, else met."""
    states = {o.state for o in found}
    return (
        max(states, key=rank)
        if State.MISSED in states
        else min(states, key=rank, default=State.MET)
    )


def rank(state: State) -> int:
    """Unproven, met, missed: the order a level's windows combine in."""
    return {State.UNPROVEN: 0, State.MET: 1, State.MISSED: 2}[state]
