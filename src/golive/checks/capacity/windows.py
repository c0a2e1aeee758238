"""Pure judgement of the sustained phase: whether latency drifts under fixed load (a
least-squares trend with a 95% interval that allows for correlated latencies), and how its
failures are attributed. The long-input ladder is judged in `context_rules`. Table-tested,
no I/O."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from golive.checks.capacity.rules import (
    OUT_OF_MEMORY,
    Action,
    Classification,
    StabilityPolicy,
    beyond_need,
    first_step_failed,
    refusal_reason,
    saturation,
    shed_load,
)
from golive.checks.capacity.window_sizing import COVERED_SHARE
from golive.config import CapacityConfig

MIN_SUSTAINED_COMPLETIONS = 3  # a latency trend needs at least three points
# ... and a drift sets a limit only over ten completions a third: on the CPU target, 10 s
# windows of ~12 completions measured drifts from -29% to +75% between runs of one load.
MIN_DRIFT_COMPLETIONS = 30


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


@dataclass(frozen=True, slots=True)
class _Fit:
    """OLS of y on t: the line, each point's residual (in the points' order) and Sxx."""

    slope: float
    intercept: float
    residuals: list[float]
    sxx: float

    def relative_growth(self, t0: float, t1: float) -> float:
        start = self.intercept + self.slope * t0
        return (self.slope * (t1 - t0)) / start if start > 0 else 0.0


def _least_squares(points: Sequence[tuple[float, float]]) -> _Fit | None:
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
    return _Fit(slope, intercept, [y - intercept - slope * t for t, y in points], sxx)


def trend(points: Sequence[tuple[float, float]]) -> Trend | None:
    """OLS of y on t, the points put in time order; None with fewer than 3 points or no spread
    in time. Consecutive latencies are correlated (requests in flight together share batches),
    so the 95% interval is the wider of two that allow for it: Newey-West's (HAC: Bartlett
    weights up to the lag of their 1994 plug-in rule, t with n-2 df) and the AR(1)-widened one
    (`_ar1_half`); on independent points both are the plain OLS interval. On simulated
    stationary AR(1) series (seed 1, 1,000 each) the interval excluded a zero slope in, plain
    OLS / Newey-West alone / AR(1) alone / the wider: rho 0.8, 300 points 52% / 17% / 8.3% /
    8.3%; rho 0.9, 300 points 65% / 27% / 9.2% / 9.2%; rho 0.8, 40 points 53% / 38% / 13% /
    13%; independent, 300 points 6.1% / 8.4% / 5.2% / 4.8%, 40 points 5.1% / 16% / 4.3% /
    3.9%. Newey-West alone is too narrow at these lengths; it widens where the correlation is
    not AR(1)'s (slow level switches: 40% by AR(1) alone, 35% by the wider)."""
    ordered = sorted(points)
    fit = _least_squares(ordered)
    if fit is None:
        return None
    half = max(_newey_west_half(ordered, fit), _ar1_half(fit))
    growth = fit.relative_growth(ordered[0][0], ordered[-1][0])
    return Trend(fit.slope, fit.slope - half, fit.slope + half, growth, len(ordered))


def trend_of_gauge(points: Sequence[tuple[float, float]]) -> Trend | None:
    """`trend` for a gauge sampled faster than it changes (a sampler at 5 Hz). Measured on
    simulated stationary gauges (AR(1), seed 1, 1,000 each), growth was read (the interval
    excluding zero) in, plain OLS / Newey-West alone / AR(1) alone / the wider: 200 samples
    at rho 0.9, 0.95, 0.98: 68-85% / 31-60% / 11-20% / 11-20%; 65 samples at rho 0.8:
    51% / 32% / 14% / 14%. Newey-West alone is far too narrow for a gauge, so the AR(1)
    widening stays; the wider of the two is never narrower than it."""
    return trend(points)


def _autocovariance(values: Sequence[float], lag: int) -> float:
    return sum(a * b for a, b in zip(values, values[lag:], strict=False))


def _newey_west_half(ordered: Sequence[tuple[float, float]], fit: _Fit) -> float:
    """Half the slope's 95% interval from Newey-West's HAC variance of the OLS slope: the
    scores (t - mean t) x residual, in time order, their autocovariances weighted 1 - j/(L+1)
    up to the lag L of Newey and West's (1994) plug-in rule for the Bartlett kernel."""
    n = len(ordered)
    mean_t = sum(t for t, _ in ordered) / n
    scores = [(t - mean_t) * r for (t, _), r in zip(ordered, fit.residuals, strict=True)]
    lag = _plug_in_lag(scores)
    weighted = sum((1 - j / (lag + 1)) * _autocovariance(scores, j) for j in range(1, lag + 1))
    long_run = max(_autocovariance(scores, 0) + 2 * weighted, 0.0)
    return _t_quantile(n) * math.sqrt(long_run * n / (n - 2)) / fit.sxx


def _plug_in_lag(scores: Sequence[float]) -> int:
    """Newey and West (1994), Bartlett kernel: L = 1.1447 (s1/s0)^(2/3) n^(1/3), s0 and s1
    from the scores' autocovariances up to 4 (n/100)^(2/9)."""
    n = len(scores)
    first = int(4 * (n / 100) ** (2 / 9))
    covariances = [_autocovariance(scores, j) for j in range(first + 1)]
    s0 = covariances[0] + 2 * sum(covariances[1:])
    s1 = 2 * sum(j * c for j, c in enumerate(covariances))
    if s0 <= 0:
        return min(first, n - 2)
    return min(int(1.1447 * abs(s1 / s0) ** (2 / 3) * n ** (1 / 3)), n - 2)


def _ar1_half(fit: _Fit) -> float:
    """Half the slope's 95% interval with the OLS variance widened by the residuals' lag-1
    autocorrelation rho (AR(1): x (1+rho)/(1-rho), t with n(1-rho)/(1+rho) points); with
    rho <= 0 the plain OLS interval."""
    n = len(fit.residuals)
    square = sum(r * r for r in fit.residuals)
    rho = sum(a * b for a, b in itertools.pairwise(fit.residuals)) / square if square else 0
    rho = min(max(rho, 0.0), 0.99)
    effective = max(3, int(n * (1 - rho) / (1 + rho)))
    return _t_quantile(effective) * math.sqrt(square / (n - 2) / fit.sxx * (1 + rho) / (1 - rho))


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
    coverage: str | None = None,
    thirds: float | None = None,
    stall: str | None = None,
    failure_detail: str = "",
    mean_waiting: float | None = None,
    required_concurrency: int | None = None,
    max_running: float | None = None,
    cancelled: int = 0,
    after_restart: bool = False,
    retries: tuple[int, float] = (0, 0.05),  # the client's retries, and the storm's share
) -> Classification:
    """Latency rising while throughput stays flat means pressure is accumulating. A rise
    must be significant (the fitted slope's 95% interval above zero) and important: by the
    fit over the run (above `max_growth`) and by the last third's median against the first
    third's (`thirds`, above 2/3 of it: those medians are two thirds of the run apart).
    With thousands of requests a tiny drift is significant; it is not a limit. A failure
    is put on capacity only with the engine's saturation and a stated need above the limit
    (`beyond_need`)."""
    policy = StabilityPolicy(max_preemptions=max_preemptions)
    saturated_by = saturation(concurrency, preemptions, mean_waiting, max_running, policy) or (
        f"the engine ran out of memory ({failure_detail})"
        if OUT_OF_MEMORY.search(failure_detail)
        else None
    )

    need = functools.partial(beyond_need, saturated_by=saturated_by, required=required_concurrency)
    # After a restart the window ran at the ramp's last stable step: a failure there with the
    # engine saturated is load (a lower limit, or capacity with a need above it); without
    # saturation it continues under the limit its death set (failure-continues).
    continues = after_restart and saturated_by is None
    if engine_died:
        reason = f"the engine terminated under sustained load at concurrency {concurrency}"
        return need(_not_sustained(reason, concurrency, failure_detail, continues))
    if stall is not None:
        return Classification(Action.STALLED, stall)
    if refused:  # before coverage: a window cut short by refusals is the refusals' finding
        return Classification(
            Action.SERVER_REFUSED,
            "under sustained load, "
            + refusal_reason(f"{refused}/{total}", refused_detail, concurrency),
        )
    if coverage is not None:
        return Classification(Action.NO_DATA, f"{coverage}: the sustained window is not judged")
    if errors and errors == cancelled and concurrency <= 1:
        return Classification(
            Action.NO_DATA,
            f"{cancelled} request(s) did not finish within the sustained window and its drain "
            "at concurrency 1 (golive ended them; nothing failed): the engine hangs or is "
            "slower than the window (lengthen capacity.duration_s)",
        )
    if errors:
        reason = (
            f"{errors}/{total} requests failed under sustained load at concurrency {concurrency}"
        )
        return need(_not_sustained(reason, concurrency, failure_detail, continues))
    if total - errors < MIN_SUSTAINED_COMPLETIONS:
        return Classification(
            Action.NO_DATA,
            f"only {total - errors} request(s) completed under sustained load: too few to "
            f"judge a trend (at least {MIN_SUSTAINED_COMPLETIONS}); run longer (--duration)",
        )
    if preemptions is not None and preemptions > max_preemptions:
        return need(
            Classification(
                Action.LIMIT_TRAFFIC,
                f"the engine preempted {preemptions:g} running request(s) under sustained "
                f"load at concurrency {concurrency}: its KV cache runs out",
                ceiling=max(1, concurrency // 2),
            )
        )
    if shed_load(retries[0], total, retries[1]):  # whatever the engine's queue showed
        return Classification(
            Action.LIMIT_TRAFFIC,
            f"retry storm under sustained load at concurrency {concurrency}: the client "
            f"retried {retries[0]} time(s) for {total} requests (above {retries[1]:.0%}): the "
            "server shed load (429/503) or answered too late for the client",
            ceiling=max(1, concurrency // 2),
        )
    halves = "" if thirds is None else f", last third's median {thirds:+.0%} on the first's"
    if (
        latency is not None
        and latency.low > 0
        and latency.relative_growth > max_growth
        # the thirds' medians sit two thirds of the run apart: the same growth rate is 2/3
        and (thirds is None or thirds > max_growth * 2 / 3)
    ):
        flat = _flat(window_throughput)
        shape = "while throughput stayed flat" if flat else "and throughput moved too"
        if total - errors < MIN_DRIFT_COMPLETIONS:
            return Classification(
                Action.NO_DATA,
                f"latency rose {latency.relative_growth:.0%} over the run{halves}, but only "
                f"{total - errors} requests completed: too few to tell a drift from noise (a "
                f"limit needs at least {MIN_DRIFT_COMPLETIONS}, ten a third); run longer "
                "(--duration)",
            )
        return Classification(
            Action.LIMIT_TRAFFIC,
            f"latency rose {latency.relative_growth:.0%} over the run (slope "
            f"{latency.slope:.4f} s/s, 95% CI {latency.low:.4f}..{latency.high:.4f}{halves}) "
            f"{shape}",
            ceiling=max(1, concurrency // 2),
        )
    growth = (
        ""
        if latency is None
        else f" (latency trend {latency.relative_growth:+.0%}, "
        f"CI {latency.low:.4f}..{latency.high:.4f} s/s{halves}; limit {max_growth:.0%})"
    )
    return Classification(
        Action.STABLE, f"steady at concurrency {concurrency}{growth}", ceiling=concurrency
    )


def _flat(values: Sequence[float], tolerance: float = 0.15) -> bool:
    if len(values) < 2:
        return True
    mean = sum(values) / len(values)
    return mean > 0 and (max(values) - min(values)) / mean <= 2 * tolerance


def thirds_growth(points: Sequence[tuple[float, float]]) -> float | None:
    """The last third's median latency against the first third's, by completion time (None
    with fewer than 6 points): the size of a drift, beside the fit's significance."""
    if len(points) < 6:
        return None
    ordered = [y for _, y in sorted(points)]
    third = len(ordered) // 3
    first, last = sorted(ordered[:third]), sorted(ordered[-third:])
    head, tail = first[len(first) // 2], last[len(last) // 2]
    return tail / head - 1 if head > 0 else None


def _not_sustained(
    reason: str, concurrency: int, detail: str, continues: bool = False
) -> Classification:
    """Failures or a death under sustained load, with no saturation finding of their own: at
    concurrency 1 the lowest load failed (`first_step_failed`); run after a restart, at the
    ramp's last stable step, the failure continues under the limit the death set, which no
    lower limit is known to fix (`failure-continues`: hold); else the ramp's step did not
    hold for the sustained window, so traffic is capped at half of it."""
    quoted = f" ({detail})" if detail else ""
    if continues:
        return Classification(
            Action.CONTINUES,
            f"{reason}{quoted}, the ramp's last stable step, after the engine was restarted "
            "following its death higher up: the failure continues under that limit with no "
            "saturation evidence, so no limit is known to hold; find its cause",
        )
    if concurrency <= 1:
        return first_step_failed(reason, detail)
    lower = max(1, concurrency // 2)
    return Classification(
        Action.LIMIT_TRAFFIC,
        f"{reason}{quoted}: concurrency {concurrency} did not hold for the sustained window; "
        f"cap traffic at {lower} until the failure is explained",
        ceiling=lower,
    )


def short_window(
    result: Classification,
    duration_s: float,
    completed: int,
    config: CapacityConfig,
) -> Classification:
    """A window that found nothing wrong but was shorter, or answered fewer, than a decision
    needs (`capacity.min_sustained_s`, `min_sustained_completions`) is no_data saying how long
    to run. Whatever it found stands (a drift, errors, a death: a short window because the
    engine died is that death, not a short run); a window cut by its request cap after the
    share of its length a window must cover is not short either."""
    if result.action is not Action.STABLE:
        return result
    short = []
    if duration_s < config.min_sustained_s * COVERED_SHARE:
        short.append(
            f"ran {duration_s:.0f} s, shorter than the {config.min_sustained_s:.0f} s a decision "
            "needs to expose memory growth and queue behaviour (capacity.min_sustained_s): run "
            f"with --duration {config.min_sustained_s:.0f}"
        )
    if completed < config.min_sustained_completions:
        short.append(
            f"had {completed} answers, fewer than the {config.min_sustained_completions} it is "
            "judged on (capacity.min_sustained_completions): run longer (--duration)"
        )
    if not short:
        return result
    return Classification(
        Action.NO_DATA,
        f"the sustained window {' and '.join(short)}; over this window: {result.reason}",
    )
