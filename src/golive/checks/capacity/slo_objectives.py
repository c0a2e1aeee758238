"""Each SLO at one load window (issue 31 §1): a latency target is met when the window's p95
is within it with 95% confidence (the p95's distribution-free upper bound,
`golive.quantiles`), missed when its lower bound is beyond it, and unproven in between (too
few answers to tell); the per-user decode speed likewise at its 5th percentile; the error
rate on its count. Pure."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from golive.checks.capacity.latency_set import WindowLatency
from golive.quantiles import lower_bound, percentile, quantile, samples_needed
from golive.slo_config import SloConfig

LATENCY_TARGETS = (
    ("ttft_p95_ms", "ttft", "TTFT"),
    ("itl_p95_ms", "itl", "ITL"),
    ("e2e_p95_ms", "e2el", "end-to-end"),
)


class State(enum.StrEnum):
    MET = "met"
    MISSED = "missed"
    UNPROVEN = "unproven"  # within the target, but too few samples to bound it there


@dataclass(frozen=True, slots=True)
class Objective:
    """One SLO at one step: the target, what was measured, and whether it holds."""

    name: str  # the config key
    target: float
    measured: float | None
    samples: int
    state: State
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "slo": self.name,
            "target": self.target,
            "measured": None if self.measured is None else round(self.measured, 4),
            "samples": self.samples,
            "state": self.state.value,
            "why": self.why,
        }


def _judged(target: float, values: list[float], said: str, sign: int) -> tuple[State, str]:
    """Whether the p95 of `values` (sign 1) is below `target`, or the p5 above it (sign -1,
    the values negated), with 95% confidence either way: met when its upper bound is within
    the target, missed when its lower bound is beyond it, else unproven."""
    upper = quantile(values, 95).upper
    lower = lower_bound(values, 95)
    limit = sign * target
    if lower is not None and lower > limit:
        return State.MISSED, f"{said} misses {target:g} (95% bound {sign * lower:.1f})"
    if upper is not None and upper <= limit:
        return State.MET, f"{said} meets {target:g} (95% bound {sign * upper:.1f})"
    need = "" if upper is not None else f"; a bound needs {samples_needed(95)}"
    return State.UNPROVEN, f"{said}: not shown to meet {target:g} or to miss it{need}"


def _latency(window: WindowLatency, key: str, metric: str, label: str, target: float) -> Objective:
    values = window.values(metric)
    p95 = percentile(values, 95)
    if p95 is None:
        return Objective(key, target, None, 0, State.UNPROVEN, f"no {label} was measured")
    said = f"{label} p95 {p95:.1f} ms of {len(values)} samples"
    state, why = _judged(target, values, said, 1)
    return Objective(key, target, p95, len(values), state, why)


def _speed(window: WindowLatency, floor: float) -> Objective:
    key = "min_output_tokens_per_s_per_user"
    speeds = [s for a in window.answers if (s := a.tokens_per_s) is not None]
    p5 = percentile(speeds, 5)
    if p5 is None:
        return Objective(key, floor, None, 0, State.UNPROVEN, "no answer's decode speed measured")
    said = f"p5 decode speed {p5:.1f} tokens/s of {len(speeds)} answers"
    # the 5th percentile's bounds are the 95th's of the negated speeds
    state, why = _judged(floor, [-v for v in speeds], said, -1)
    return Objective(key, floor, p5, len(speeds), state, why)


def objectives(window: WindowLatency, slo: SloConfig) -> list[Objective]:
    """Every stated objective at one window."""
    found = [
        _latency(window, key, metric, label, target)
        for key, metric, label in LATENCY_TARGETS
        if (target := getattr(slo, key)) is not None
    ]
    if slo.error_rate is not None:
        rate = window.error_rate
        if rate is None:
            found.append(
                Objective("error_rate", slo.error_rate, None, 0, State.UNPROVEN, "no requests")
            )
        else:
            state = State.MISSED if rate > slo.error_rate else State.MET
            failed = window.requests - window.completed
            sign = ">" if state is State.MISSED else "<="
            why = f"{failed}/{window.requests} failed ({rate:.1%} {sign} {slo.error_rate:.1%})"
            found.append(Objective("error_rate", slo.error_rate, rate, window.requests, state, why))
    if slo.min_output_tokens_per_s_per_user is not None:
        found.append(_speed(window, slo.min_output_tokens_per_s_per_user))
    return found


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
