"""The sustained window's drift interval on correlated latencies (issue §6): consecutive
latencies share batches, so the slope's interval must allow for correlated residuals or a
stationary engine reads as drifting. Simulated series, fixed seeds (random.Random)."""

from __future__ import annotations

import math
import random

import pytest

from golive.checks.capacity.rules import Action
from golive.checks.capacity.windows import classify_sustained, thirds_growth, trend

SERIES = 200  # seeds 0..199, one series each


def _latencies(seed: int, points: int, rho: float, slope: float = 0.0) -> list[tuple[float, float]]:
    """`points` completions one second apart: 1 s plus `slope` s/s plus stationary AR(1) noise
    (lag-1 correlation `rho`, innovations of 20 ms)."""
    rng = random.Random(seed)
    noise = rng.gauss(0, 0.02) / math.sqrt(1 - rho * rho)
    series = []
    for t in range(points):
        noise = rho * noise + rng.gauss(0, 0.02)
        series.append((float(t), 1.0 + slope * t + noise))
    return series


def _plain_half_width(points: list[tuple[float, float]]) -> float:
    """The interval that assumes independent latencies: OLS, t at n-2 df (1.97 for 300)."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((t - mean_t) ** 2 for t, _ in points)
    slope = sum((t - mean_t) * (y - mean_y) for t, y in points) / sxx
    square = sum((y - mean_y - slope * (t - mean_t)) ** 2 for t, y in points)
    return 1.97 * math.sqrt(square / (n - 2) / sxx)


def _excludes_zero_share(rho: float) -> tuple[float, float]:
    """Share of the flat series whose interval excludes a zero slope: plain OLS, golive's."""
    plain = drift = 0
    for seed in range(SERIES):
        points = _latencies(seed, 300, rho)
        fitted = trend(points)
        assert fitted is not None
        plain += abs(fitted.slope) > _plain_half_width(points)
        drift += not fitted.low <= 0 <= fitted.high
    return plain / SERIES, drift / SERIES


@pytest.mark.parametrize(
    ("rho", "plain_at_least", "golive_at_most"),
    [
        # measured on these 200: plain 51%, golive's 6.5% (1,000 seeds: 52.4%, 8.3%)
        (0.8, 0.40, 0.12),
        # measured on these 200: plain 24%, golive's 4% (1,000 seeds: 27.5%, 7.0%)
        (0.5, 0.18, 0.11),
        # independent: plain 3%, golive's 3.5% (1,000 seeds: 6.1%, 4.8%)
        (0.0, 0.0, 0.09),
    ],
)
def test_a_flat_correlated_latency_is_not_read_as_drift(
    rho: float, plain_at_least: float, golive_at_most: float
) -> None:
    """A stationary engine whose consecutive latencies are correlated (AR(1), 300 answers,
    200 seeds): the interval that assumes independence calls half of them a significant
    drift; golive's calls one in fifteen, near the 5% a 95% interval promises."""
    plain, drift = _excludes_zero_share(rho)
    assert plain >= plain_at_least
    assert drift <= golive_at_most
    if rho:
        assert drift < plain / 3


def _expected_factor(points: int, rho: float) -> float:
    """How much wider the slope's true spread is than the independent formula says, for
    AR(1) noise: sqrt(x'Rx / x'x), x the centred times, R[i][j] = rho^|i-j|."""
    times = [t - (points - 1) / 2 for t in range(points)]
    quadratic = sum(
        times[i] * times[j] * rho ** abs(i - j) for i in range(points) for j in range(points)
    )
    return math.sqrt(quadratic / sum(t * t for t in times))


@pytest.mark.parametrize("rho", [0.8, 0.5])
def test_the_interval_widens_by_the_correlations_factor(rho: float) -> None:
    """On correlated latencies golive's interval is wider than the independent one by about
    the factor the correlation spreads the slope (2.93x at rho 0.8, 1.72x at 0.5 over 300
    points; measured 2.92x and 1.71x on average)."""
    ratios = []
    for seed in range(60):
        points = _latencies(seed, 300, rho)
        fitted = trend(points)
        assert fitted is not None
        ratios.append((fitted.high - fitted.low) / 2 / _plain_half_width(points))
    mean = sum(ratios) / len(ratios)
    assert mean == pytest.approx(_expected_factor(300, rho), rel=0.12)


@pytest.mark.parametrize("points", [300, 40])
def test_independent_latencies_keep_the_plain_width(points: int) -> None:
    """On independent latencies the interval is the plain OLS one or barely wider (measured
    4% wider on average at 300 points, 6% at 40): allowing for correlation costs no drift."""
    ratios = []
    for seed in range(60):
        series = _latencies(seed, points, 0.0)
        fitted = trend(series)
        assert fitted is not None
        ratios.append((fitted.high - fitted.low) / 2 / _plain_half_width(series))
    assert min(ratios) >= 0.99
    assert sum(ratios) / len(ratios) <= 1.12


@pytest.mark.parametrize("growth", [0.4, 0.3])
def test_a_real_drift_on_correlated_latencies_is_still_a_limit(growth: float) -> None:
    """Latency rising 40% (or 30%) over 300 s under the same correlated noise: every seed's
    interval stays above zero and the window is a traffic limit."""
    slope = growth / 300
    for seed in range(30):
        points = _latencies(seed, 300, 0.8, slope)
        fitted = trend(points)
        assert fitted is not None
        assert fitted.low > 0
        result = classify_sustained(
            fitted, [1.0] * 6, 0, 300, False, 8, thirds=thirds_growth(points)
        )
        assert result.action is Action.LIMIT_TRAFFIC
        assert result.ceiling == 4


def test_the_interval_does_not_depend_on_the_records_order() -> None:
    """The judge lists answers in send order, not completion order: the interval is taken on
    the answers in time order, so a shuffled list gives the same interval."""
    points = _latencies(7, 300, 0.8)
    shuffled = list(points)
    random.Random(1).shuffle(shuffled)
    assert trend(shuffled) == trend(points)
