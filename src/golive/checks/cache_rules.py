"""Pure prefix-cache judgement: cold and warm evidence against the engine's counters, the
controls, a rank test on TTFT and the diagnosis when reuse is not proven."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.results import CheckClass, CheckResult, Status


@dataclass(frozen=True, slots=True)
class CacheStep:
    """One request of the protocol and the counter deltas of its own metrics window."""

    name: str  # cold-0, warm-1, control:system_prompt, ...
    prompt_tokens: int | None
    cached_tokens: int | None  # usage.prompt_tokens_details.cached_tokens
    ttft_s: float | None
    queries: float | None  # Δ prefix_cache_queries
    hits: float | None  # Δ prefix_cache_hits
    cached_counter: float | None  # Δ prompt_tokens_cached (or by_source local_cache_hit)
    ok: bool = True


@dataclass(frozen=True, slots=True)
class RankTest:
    """Mann-Whitney U (cold > warm), one-sided p, and Cliff's delta as the effect size."""

    u: float
    p_value: float
    cliffs_delta: float
    cold_median: float
    warm_median: float


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def rank_test(cold: Sequence[float], warm: Sequence[float]) -> RankTest | None:
    """Exact one-sided p for small samples (all orderings), normal approximation beyond."""
    if not cold or not warm:
        return None
    greater = sum(1.0 if c > w else 0.5 if c == w else 0.0 for c in cold for w in warm)
    n, m = len(cold), len(warm)
    delta = (2 * greater - n * m) / (n * m)
    if n + m <= 16:
        p = _exact_p(greater, n, m)
    else:
        mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        z = (greater - mean - 0.5) / sd
        p = 0.5 * math.erfc(z / math.sqrt(2))
    return RankTest(greater, p, delta, _median(cold), _median(warm))


def _exact_p(u: float, n: int, m: int) -> float:
    """P(U >= u) under H0 by counting rank arrangements (dynamic programming)."""
    # count[i][j][k]: arrangements of i cold and j warm with U = k
    table: dict[tuple[int, int], dict[int, int]] = {(0, 0): {0: 1}}
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            counts: dict[int, int] = {}
            if i > 0:  # the largest value is cold: it beats all j warm values
                for k, c in table[(i - 1, j)].items():
                    counts[k + j] = counts.get(k + j, 0) + c
            if j > 0:
                for k, c in table[(i, j - 1)].items():
                    counts[k] = counts.get(k, 0) + c
            table[(i, j)] = counts
    final = table[(n, m)]
    total = sum(final.values())
    return sum(c for k, c in final.items() if k >= math.floor(u)) / total


@dataclass(frozen=True, slots=True)
class CacheVerdict:
    accepted: bool
    diagnosis: str
    shared_server: bool = False


def judge_reuse(
    cold: CacheStep,
    warm: Sequence[CacheStep],
    shared_tokens: int,
    block_size: int | None,
    caching_enabled: bool | None,
) -> CacheVerdict:
    """Cold pays the whole prefix; warm repeats reuse it and the counters agree with us."""
    block = block_size or 16
    if caching_enabled is False:
        return CacheVerdict(
            False, "no measured reuse: prefix caching is disabled in the engine config"
        )
    if block_size is not None and shared_tokens < block_size:
        return CacheVerdict(
            False,
            f"test too small: the shared prefix ({shared_tokens} tokens) is shorter than one "
            f"cache block ({block_size}), so it can never hit; this says nothing about the runtime",
        )
    if not cold.ok or not warm or not all(w.ok for w in warm):
        return CacheVerdict(False, "requests failed, so reuse could not be measured")
    if (cold.cached_tokens or 0) >= block or (cold.hits or 0) >= block:
        return CacheVerdict(
            False,
            f"no cold evidence: the salted first request already hit {cold.cached_tokens} cached "
            "tokens; the protocol's prefix was not new to the server",
        )
    reused = [w.cached_tokens or 0 for w in warm]
    expected = max(block, (shared_tokens // block) * block - block)
    if min(reused) < expected:
        hits = sum(w.hits or 0 for w in warm)
        if hits > 0 and sum(reused) == 0:
            return CacheVerdict(
                False,
                f"hits counted ({hits:g}) but no cached prompt tokens reached the requests: the "
                "test or the request shape is not what the cache manager expects",
            )
        return CacheVerdict(
            False,
            f"flag present, no reliable reuse: warm requests reused {reused} tokens of a "
            f"{shared_tokens}-token shared prefix (expected at least {expected})",
        )
    counted = [w.hits for w in warm]
    shared = False
    if any(h is None for h in counted):
        return CacheVerdict(
            False, "the engine's hit counter is missing, so reuse cannot be confirmed"
        )
    mismatch = [
        (r, h) for r, h in zip(reused, counted, strict=True) if h is not None and h < r - block
    ]
    if mismatch:
        return CacheVerdict(
            False,
            f"the engine's hit counter does not account for the reuse the API reports {mismatch}: "
            "the metrics may belong to another engine (a router?)",
        )
    if any(h is not None and h > r + 2 * block for r, h in zip(reused, counted, strict=True)):
        shared = True
    return CacheVerdict(
        True,
        f"cold paid the whole prefix; {len(warm)} warm repeats reused {min(reused)}-{max(reused)} "
        f"of {shared_tokens} shared tokens, matched by the engine's hit counter",
        shared,
    )


def control_invalidated(control: CacheStep, warm_reused: int, block: int) -> bool:
    """A control change invalidated (part of) the prefix when it reused a block less."""
    return (control.cached_tokens or 0) <= warm_reused - block


CACHE_FILE = "cache"  # requests/cache.jsonl


def cache_result(
    check_id: str,
    critical: bool,
    status: Status,
    summary: str,
    measurements: Mapping[str, Any] | None = None,
    evidence: tuple[str, ...] = (),
) -> CheckResult:
    return CheckResult(
        check_id,
        CheckClass.CACHE,
        critical,
        status,
        summary,
        dict(measurements or {}),
        evidence or (f"requests/{CACHE_FILE}.jsonl", "metrics/cache-steps.jsonl"),
    )
