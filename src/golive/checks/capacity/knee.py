"""The throughput knee, set only where it reproduces (issue 28 §3).

More concurrency that buys no throughput, only latency, is a knee: the ramp's ceiling. One
window per step is not enough to say so: on one H200 server and one flag set, single ramps put
the knee at 8, 16, 32 or nowhere. So a candidate knee (one window each side says so) is
measured again: the two steps around it are repeated (`capacity.knee_repeats` windows each,
alternating order so drift does not favour one side), and the knee is set only when the 95%
interval of the throughput gain, which includes the server's run-to-run spread between those
windows as well as counting noise, lies below the gain the policy asks for, and the interval
of the latency growth lies above the growth it allows. Pure: step figures in, a finding out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from golive.checks.capacity.step_stats import StepStats

if TYPE_CHECKING:
    from golive.checks.capacity.rules import StabilityPolicy

# Student's t, two-sided 95%, by degrees of freedom (1.96 beyond the table)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t975(df: int) -> float:
    if df < 1:
        return math.inf
    return _T975[df - 1] if df <= len(_T975) else 2.0 if df < 30 else 1.96


@dataclass(frozen=True, slots=True)
class Ratio:
    """A ratio of two means with its 95% interval (multiplicative, delta method)."""

    value: float
    low: float
    high: float
    windows: tuple[int, int]  # windows behind the denominator and the numerator


def _mean_and_rel_var(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the relative variance of the mean (0 from one value: no spread known)."""
    mean = sum(values) / len(values)
    if len(values) < 2 or mean <= 0:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, var / (len(values) * mean * mean)


def ratio(before: Sequence[float], after: Sequence[float], counting: float = 0.0) -> Ratio | None:
    """after/before on the means, its interval from both sides' spread (repeated windows) or
    from `counting` noise (one window a side)."""
    if not before or not after:
        return None
    m_b, v_b = _mean_and_rel_var(before)
    m_a, v_a = _mean_and_rel_var(after)
    if m_b <= 0 or m_a <= 0:
        return None
    value = m_a / m_b
    if len(before) > 1 and len(after) > 1:
        # the windows' own spread, counting noise included (each window's count varies), at
        # 95% with Student's t: a closed loop at fixed concurrency is not a Poisson count
        width = t975(len(before) + len(after) - 2) * math.sqrt(v_b + v_a)
    else:  # one window a side: counting noise at 95% (the ramp's single rule)
        width = 1.96 * math.sqrt(counting)
    return Ratio(value, value * max(0.0, 1 - width), value * (1 + width), (len(before), len(after)))


def _usable(runs: Sequence[StepStats]) -> list[StepStats]:
    return [r for r in runs if r.completed > 0 and r.throughput_rps > 0 and r.e2e_p50_s]


def figures(previous: Sequence[StepStats], step: Sequence[StepStats]) -> tuple[Ratio, Ratio] | None:
    """(throughput gain, median-latency growth) from `previous` to `step`, each side's first
    run the ramp's own window and the rest its repeats."""
    before, after = _usable(previous), _usable(step)
    if not before or not after:
        return None
    counting = 1 / sum(r.completed for r in before) + 1 / sum(r.completed for r in after)
    gain = ratio([r.throughput_rps for r in before], [r.throughput_rps for r in after], counting)
    growth = ratio([r.e2e_p50_s or 0.0 for r in before], [r.e2e_p50_s or 0.0 for r in after])
    if gain is None or growth is None:
        return None
    return gain, growth


def candidate(previous: StepStats, step: StepStats, policy: StabilityPolicy) -> bool:
    """One window a side says knee: worth measuring again before it is believed."""
    found = figures([previous], [step])
    if found is None:
        return False
    gain, growth = found
    return gain.value < policy.min_throughput_gain and growth.value > policy.max_latency_growth


def confirmable(
    previous: StepStats, step: StepStats, policy: StabilityPolicy, repeats: int
) -> bool:
    """Whether `repeats` windows a side could confirm even a perfectly flat gain: counting
    noise alone (1/n a window) must leave the interval below the policy's gain. On a 2-core
    CPU engine a window holds 3-5 answers and no number of repeats would do: none are run."""
    n = min(previous.completed, step.completed)
    if repeats < 2 or n <= 0:
        return False
    half_width = t975(2 * repeats - 2) * math.sqrt(2 / (repeats * n))
    return 1 + half_width < policy.min_throughput_gain


def knee(
    previous: Sequence[StepStats], step: Sequence[StepStats], policy: StabilityPolicy
) -> str | None:
    """The knee between two steps, when the intervals exclude "no knee" (None otherwise)."""
    found = figures(previous, step)
    if found is None:
        return None
    gain, growth = found
    if gain.high >= policy.min_throughput_gain or growth.value <= policy.max_latency_growth:
        return None
    if min(gain.windows) > 1 and growth.low <= policy.max_latency_growth:
        return None
    last = step[0]
    waiting = last.max_waiting or 0
    where = (
        f"the extra requests queue in the engine (queue {last.queue_mean_s or 0:.2f} s on "
        f"average, up to {waiting:g} waiting)"
        if waiting > 0
        else "the engine's waiting queue stayed empty: the extra time goes into each "
        "request (larger batches, or the API server), not into its queue"
    )
    return (
        f"from concurrency {previous[0].concurrency} to {last.concurrency} throughput changed "
        f"{_stated(gain, previous, step)} while median latency grew {growth.value:.1f}x: {where}"
    )


def _stated(gain: Ratio, previous: Sequence[StepStats], step: Sequence[StepStats]) -> str:
    if gain.windows == (1, 1):
        noise = gain.high - gain.value
        return (
            f"{gain.value:.2f}x (±{noise:.2f}, {previous[0].completed} and "
            f"{step[0].completed} requests)"
        )
    return (
        f"{gain.value:.2f}x (95% interval {gain.low:.2f}-{gain.high:.2f}x over "
        f"{gain.windows[0]} and {gain.windows[1]} windows, the server's run-to-run spread "
        "included)"
    )


def not_reproduced(
    previous: Sequence[StepStats], step: Sequence[StepStats], policy: StabilityPolicy
) -> str | None:
    """A candidate knee that its repeats did not confirm, said so (None: none was seen)."""
    if len(previous) < 2 or len(step) < 2 or not candidate(previous[0], step[0], policy):
        return None
    found = figures(previous, step)
    if found is None or knee(previous, step, policy) is not None:
        return None
    gain, growth = found
    first = step[0].throughput_rps / previous[0].throughput_rps
    return (
        f"no significant knee from concurrency {previous[0].concurrency} to "
        f"{step[0].concurrency}: the first windows said {first:.2f}x, "
        f"but over {gain.windows[0]} and {gain.windows[1]} windows the gain was "
        f"{gain.value:.2f}x (95% interval {gain.low:.2f}-{gain.high:.2f}x) and latency grew "
        f"{growth.value:.1f}x ({growth.low:.1f}-{growth.high:.1f}x)"
    )
