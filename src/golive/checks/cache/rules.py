"""Pure prefix-cache judgement: cold and warm evidence against the engine's counters, the
controls, a rank test on TTFT and the diagnosis when reuse is not proven."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import CACHE_STEPS
from golive.metrics import MetricsDelta
from golive.results import CheckClass, ResultsOf

START_SCRAPE = "cache-00-start"  # metrics/cache-00-start.prom: the engine's cache config


@dataclass(frozen=True, slots=True)
class LoggedCache:
    """What the server's startup log said about its cache (`--log`), as the protocol file
    keeps it for the judge."""

    attention_block_size: int | None = None
    prefix_caching: bool | None = None
    mamba_cache_mode: str | None = None
    retention_interval: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "attention_block_size": self.attention_block_size,
            "prefix_caching": self.prefix_caching,
            "mamba_cache_mode": self.mamba_cache_mode,
            "retention_interval": self.retention_interval,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any] | None) -> LoggedCache | None:
        if row is None:
            return None
        return cls(
            row.get("attention_block_size"),
            row.get("prefix_caching"),
            row.get("mamba_cache_mode"),
            row.get("retention_interval"),
        )


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

    def to_json(self) -> dict[str, Any]:
        """One line of `metrics/cache-steps.jsonl`."""
        return {
            "step": self.name,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "ttft_s": self.ttft_s,
            "d_queries": self.queries,
            "d_hits": self.hits,
            "d_prompt_tokens_cached": self.cached_counter,
            "ok": self.ok,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CacheStep:
        """Read back a line of `metrics/cache-steps.jsonl` (for re-judging a bundle)."""
        return cls(
            str(row["step"]),
            row.get("prompt_tokens"),
            row.get("cached_tokens"),
            row.get("ttft_s"),
            row.get("d_queries"),
            row.get("d_hits"),
            row.get("d_prompt_tokens_cached"),
            bool(row.get("ok", True)),
        )

    @property
    def engine_reused(self) -> float | None:
        """Prompt tokens the engine served from its cache for this request, by its own
        counters (cached prompt tokens where exposed, else prefix-cache hits, in tokens)."""
        return self.cached_counter if self.cached_counter is not None else self.hits

    @property
    def reused(self) -> float:
        """The engine's count where it has one, else the API's usage field, else 0."""
        if self.engine_reused is not None:
            return self.engine_reused
        return float(self.cached_tokens or 0)


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
    """Cold pays the whole prefix; warm repeats reuse it. The engine's own counters
    (`prefix_cache_hits`, `prompt_tokens_cached`, in tokens, as deltas around each isolated
    request) are the measure; `usage.prompt_tokens_details.cached_tokens` corroborates where
    the server reports it (vLLM leaves `--enable-prompt-tokens-details` off by default)."""
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
    if cold.engine_reused is None or any(w.engine_reused is None for w in warm):
        return CacheVerdict(
            False,
            "the engine's prefix-cache counters (prefix_cache_hits, prompt_tokens_cached) are "
            "missing from its metrics, so reuse cannot be measured; check the metrics scrape",
        )
    api = cold.cached_tokens is not None and all(w.cached_tokens is not None for w in warm)
    if cold.reused >= block or (api and (cold.cached_tokens or 0) >= block):
        return CacheVerdict(
            False,
            f"no cold evidence: the salted first request already reused {cold.reused:g} cached "
            "tokens; the protocol's prefix was not new to the server",
        )
    engine = [w.reused for w in warm]
    expected = max(block, (shared_tokens // block) * block - block)
    told = [int(w.cached_tokens or 0) for w in warm] if api else None
    if min(engine) < expected:
        if told is not None and min(told) >= expected:
            return CacheVerdict(
                False,
                f"the API reports {told} cached tokens but the engine's counters moved only "
                f"{[f'{e:g}' for e in engine]}: the metrics may belong to another engine "
                "(a router?)",
            )
        return CacheVerdict(
            False,
            f"flag present, no reliable reuse: by the engine's counters warm requests reused "
            f"{[f'{e:g}' for e in engine]} tokens of a {shared_tokens}-token shared prefix "
            f"(expected at least {expected})",
        )
    if told is not None and sum(told) == 0:
        return CacheVerdict(
            False,
            f"hits counted ({sum(engine):g}) but no cached prompt tokens reached the requests: "
            "the test or the request shape is not what the cache manager expects",
        )
    mismatch = (
        []
        if told is None
        else [(t, e) for t, e in zip(told, engine, strict=True) if abs(t - e) > block]
    )
    prompt = max((w.prompt_tokens or 0) for w in warm)
    shared_server = any(e > prompt + block for e in engine) or any(
        e > t + 2 * block for t, e in mismatch
    )
    if mismatch and not shared_server:
        return CacheVerdict(
            False,
            f"the engine's counters do not agree with the reuse the API reports (API, engine: "
            f"{mismatch}): the metrics may belong to another engine (a router?)",
        )
    source = (
        f"corroborated by the API's cached_tokens {min(told)}-{max(told)}"
        if told is not None
        else "the API reports no cached_tokens (--enable-prompt-tokens-details is off)"
    )
    return CacheVerdict(
        True,
        f"cold paid the whole prefix; {len(warm)} warm repeats reused {min(engine):g}-"
        f"{max(engine):g} of {shared_tokens} shared tokens by the engine's own counters, "
        f"{source}",
        shared_server,
    )


def cached_prompt_tokens(delta: MetricsDelta) -> float | None:
    """Prompt tokens the engine served from its prefix cache in a metrics window:
    `prompt_tokens_cached`, else `prompt_tokens_by_source{source="local_cache_hit"}` (None
    where the engine exposes neither)."""
    counted = delta.counter("prompt_tokens_cached")
    if counted is None:
        counted = delta.counter("prompt_tokens_by_source", source="local_cache_hit")
    return counted


def engine_reused_tokens(delta: MetricsDelta) -> float | None:
    """The engine's own count of reused prompt tokens in a window: cached prompt tokens where
    exposed, else prefix-cache hits (also in tokens); the order `CacheStep.engine_reused`
    reads its saved fields in."""
    counted = cached_prompt_tokens(delta)
    return counted if counted is not None else delta.counter("prefix_cache_hits")


def control_invalidated(control: CacheStep, warm_reused: float, block: int) -> bool:
    """A control change invalidated (part of) the prefix when it reused a block less."""
    return control.reused <= warm_reused - block


CACHE_FILE = "cache"  # requests/cache.jsonl


CACHE_RESULT = ResultsOf(CheckClass.CACHE, (f"requests/{CACHE_FILE}.jsonl", CACHE_STEPS))
