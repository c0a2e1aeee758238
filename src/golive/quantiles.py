"""Percentiles with their sample count and a distribution-free confidence bound (issue 19 §6).

A p95 of 15 requests is nearly their maximum: it says little about the 95th percentile of
the server's latency, and it must not become a limit. For `n` samples the k-th smallest is
an upper bound of the true q-quantile with confidence P(Binomial(n, q) <= k - 1); the
smallest such k is the bound reported. When even the largest sample is not a bound at
that confidence (1 - q^n < confidence: fewer than ln(1 - c) / ln(q) samples; 59 for a p95
and 459 for a p99 at 95% and 99%), the percentile is shown but marked too few to bound it.
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def samples_needed(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose maximum bounds the q-th percentile (q in 0..100)."""
    return math.ceil(math.log(1 - confidence) / math.log(q / 100))


@dataclass(frozen=True, slots=True)
class Quantile:
    q: float  # 0..100
    value: float | None
    samples: int
    upper: float | None  # upper confidence bound; None when the samples are too few
    needed: int  # samples the bound needs

    @property
    def bounded(self) -> bool:
        return self.upper is not None

    def note(self) -> str:
        """'' when bounded; else why this percentile is not a figure to set a limit from."""
        if self.bounded or self.value is None:
            return ""
        return (
            f"p{self.q:g} of {self.samples} samples: too few to bound it (a bound at "
            f"{CONFIDENCE:.0%} confidence needs {self.needed})"
        )


def quantile(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Quantile:
    ordered = sorted(values)
    n = len(ordered)
    k = _bound_rank(n, q / 100, confidence)
    return Quantile(
        q,
        percentile(ordered, q),
        n,
        None if k is None else ordered[k - 1],
        samples_needed(q, confidence),
    )


def _bound_rank(n: int, p: float, confidence: float) -> int | None:
    """The smallest k (1-based) with P(Binomial(n, p) <= k - 1) >= confidence, if any <= n."""
    if n == 0 or 1 - p**n < confidence:
        return None
    for j, cdf in enumerate(_binomial_cdf(n, p)):  # the bound is the (j + 1)-th smallest
        if cdf >= confidence:
            return j + 1
    return n


def _binomial_cdf(n: int, p: float) -> Iterator[float]:
    """P(Binomial(n, p) <= j) for j = 0, 1, ..., n - 1."""
    log_p, log_q = math.log(p), math.log1p(-p)
    cdf = 0.0
    for j in range(n):
        cdf += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_p
            + (n - j) * log_q
        )
        yield cdf


def lower_bound(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> float | None:
    """A lower confidence bound of the q-th percentile (q in 0..100): the k-th smallest value
    for the largest k with P(Binomial(n, q) >= k) >= confidence — the data shows the
    percentile is at least this. None for no values."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return None
    p = q / 100
    if p >= 1:
        return ordered[-1]
    k = 0
    for j, cdf in enumerate(_binomial_cdf(n, p)):  # the (j + 1)-th bounds while <= 1 - c
        if cdf > 1 - confidence + 1e-12:
            break
        k = j + 1
    return ordered[k - 1] if k else None


def _at_most(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k)."""
    if k >= n:
        return 1.0
    return next(cdf for j, cdf in enumerate(_binomial_cdf(n, p)) if j == k)


def rate_bounds(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds of a rate seen as k in n, each at `confidence`: the
    data shows the true rate is at least the first and at most the second."""
    if n <= 0:
        return 0.0, 1.0

    def solve(rising: Callable[[float], float], level: float) -> float:
        """The p where a probability that rises with p crosses `level`."""
        low, high = 0.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (low, mid) if rising(mid) > level else (mid, high)
        return (low + high) / 2

    # the lower bound: P(X >= k) is 1 - confidence there; the upper: P(X <= k) is
    lower = 0.0 if k == 0 else solve(lambda p: 1 - _at_most(k - 1, n, p), 1 - confidence)
    upper = 1.0 if k >= n else solve(lambda p: 1 - _at_most(k, n, p), confidence)
    return lower, upper


def bound_levels(
    n: int, q: float, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """The percentile levels (0..100) of the order statistics that bound the q-th percentile
    from below and above in `n` independent samples (None where that many bound nothing)."""
    if n <= 0:
        return None, None
    high = _bound_rank(n, q / 100, confidence)
    low = lower_bound([float(i) for i in range(1, n + 1)], q, confidence)
    return (
        None if low is None else 100 * (low - 1) / max(n - 1, 1),
        None if high is None else 100 * (high - 1) / max(n - 1, 1),
    )
