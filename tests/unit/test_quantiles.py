"""Issue 19 §6: a percentile carries its sample count and a confidence bound; one from too
few samples is marked and never bounds a limit."""

from __future__ import annotations

import random

import pytest

from golive.quantiles import percentile, quantile, samples_needed


def test_percentile_interpolates() -> None:
    """Percentiles interpolate between samples; none of nothing."""
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)


@pytest.mark.parametrize(
    ("q", "confidence", "needed"),
    [(95, 0.95, 59), (95, 0.99, 90), (99, 0.95, 299), (99, 0.99, 459), (50, 0.95, 5)],
)
def test_samples_a_bound_needs(q: float, confidence: float, needed: int) -> None:
    """The number of samples a distribution-free bound needs at each quantile and confidence."""
    assert samples_needed(q, confidence) == needed


def test_a_p95_of_a_six_second_cpu_window_is_not_a_bound() -> None:
    """15 requests, as a 6-second ramp step on the CPU target serves: the p95 is shown, with
    the reason it cannot set a limit."""
    found = quantile([0.5 + i / 100 for i in range(15)], 95)
    assert found.samples == 15
    assert found.value == pytest.approx(0.633)
    assert found.upper is None
    assert not found.bounded
    assert found.note() == (
        "p95 of 15 samples: too few to bound it (a bound at 95% confidence needs 59)"
    )


def test_the_bound_holds_at_its_confidence() -> None:
    """Over many draws of 200 uniform latencies, the reported upper bound lies at or above the
    true 95th percentile (0.95) at least 95% of the time — and is a sample, not a guess."""
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        values = [rng.random() for _ in range(200)]
        found = quantile(values, 95)
        assert found.upper in values
        covered += found.upper is not None and found.upper >= 0.95
    assert 0.95 <= covered / 2000 <= 0.99


def test_thousands_of_gpu_requests_bound_tightly() -> None:
    """14,051 requests, the size of the H200 tier run: the bound sits just above the p95."""
    values = [i / 14051 for i in range(14051)]
    found = quantile(values, 95)
    assert found.upper is not None
    assert found.value is not None
    assert 0 < found.upper - found.value < 0.005
