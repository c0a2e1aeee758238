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
from collections.abc import Sequence
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
    log_p, log_q = math.log(p), math.log1p(-p)
    cdf = 0.0
    for j in range(n):  # cdf = P(Binomial <= j); the bound is the (j + 1)-th smallest
        cdf += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_p
            + (n - j) * log_q
        )
        if cdf >= confidence:
            return j + 1
    return n


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
    log_p, log_q = math.log(p), math.log1p(-p)
    cdf, k = 0.0, 0
    for j in range(n):  # cdf = P(Binomial <= j): the (j + 1)-th smallest bounds while <= 1 - c
        cdf += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_p
            + (n - j) * log_q
        )
        if cdf > 1 - confidence + 1e-12:
            break
        k = j + 1
    return ordered[k - 1] if k else None
