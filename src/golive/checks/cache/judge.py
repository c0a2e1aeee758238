"""The cache family's judgement: a pure function of the bundle's cache evidence and the
profile. `golive cache` and `golive run` call it on the bundle they are writing; `golive
decide` calls it again on the sealed bundle, so every cache check is re-derivable offline.

Evidence read: `metrics/cache-protocol.json` (what the collector resolved: model, target
size, calibration, controls, the startup log's cache facts, or why it stopped),
`metrics/cache-00-start.prom` (the engine's cache_config_info) and
`metrics/cache-steps.jsonl` (each request with its own counter deltas).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import CACHE_PROTOCOL, CACHE_STEPS
from golive.bundle.store import BundleReader
from golive.checks.cache.after_load import CacheSetting, judge_after_load
from golive.checks.cache.prefix_size import prefix_size_gaps
from golive.checks.cache.recorded import steps_differences
from golive.checks.cache.retention import retention_result, retention_setting
from golive.checks.cache.rules import (
    CACHE_FILE,
    CACHE_RESULT,
    START_SCRAPE,
    CacheStep,
    LoggedCache,
    control_invalidated,
    judge_reuse,
    rank_test,
)
from golive.checks.coverage import cache_coverage
from golive.checks.relaxations import Relaxations, relaxed_gaps
from golive.config import CacheConfig
from golive.errors import BadResponse
from golive.metrics import Snapshot, parse_metrics
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig
from golive.results import CheckResult, Status, measured_int, measured_number

# cache.prefix_reuse's measurements that guardrails and watch read (`prefix_reuse`)
SHARED_PREFIX_TOKENS = "shared_prefix_tokens"
COLD_PROMPT_TOKENS = "cold_prompt_tokens"
WARM_CACHED_TOKENS_MIN = "warm_cached_tokens_min"  # the API's usage field, where reported
WARM_ENGINE_REUSED_MIN = "warm_engine_reused_min"  # the engine's own reuse count


USER_TURN_TOKENS = 24  # the part of a cold prompt that is not shared with the warm ones


def judge_cache(
    evidence: BundleReader,
    profile: Profile,
    programme: ProgrammeConfig | None = None,
    cache: CacheConfig | None = None,
) -> list[CheckResult]:
    """The cache checks; with `programme` (a bundle judged on completeness) also
    `cache.coverage`, from the warm steps the records hold; with `cache` whose
    `warm_must_be_faster` is on (the default), warm requests no faster than cold ones are a
    warn."""
    protocol = evidence.json(CACHE_PROTOCOL)
    if not isinstance(protocol, Mapping):
        return [
            CACHE_RESULT(
                "cache.prefix_reuse",
                Status.NO_DATA,
                f"no cache evidence: {CACHE_PROTOCOL} is missing from the bundle",
            )
        ]
    if protocol.get("problem"):
        return [
            CACHE_RESULT(
                "cache.prefix_reuse",
                Status.NO_DATA,
                str(protocol["problem"]),
                evidence=protocol.get("evidence") or None,  # none named: the default
            )
        ]
    rows = evidence.jsonl(CACHE_STEPS)
    mismatch = steps_differences(
        rows,
        lambda name: evidence.text(f"metrics/{name}.prom"),
        evidence.records(f"requests/{CACHE_FILE}.jsonl"),
        CACHE_STEPS,
    )
    if mismatch:
        more = f" (and {len(mismatch) - 3} more)" if len(mismatch) > 3 else ""
        why = (
            f"{CACHE_STEPS} does not match the scrapes and records behind it: "
            f"{'; '.join(mismatch[:3])}{more}; reuse is not judged from it"
        )
        return [
            CACHE_RESULT(check_id, Status.NO_DATA, why, critical=critical, evidence=(CACHE_STEPS,))
            for check_id, critical in (
                ("cache.prefix_reuse", True),
                ("cache.controls", False),
                ("cache.retention", False),
            )
        ]
    speed = cache is not None and cache.warm_must_be_faster
    # the probe after the sustained window: due where the run's config asks for it
    after_load = None if cache is None else cache.after_load_probe
    results = cache_from_steps(evidence, profile, protocol, rows, speed, after_load)
    if programme is not None:
        warm = sum(1 for row in rows if str(row.get("step", "")).startswith("warm-"))
        weaker = relaxed_gaps(programme, "cache", cache or CacheConfig())
        # the cold request's prompt as the records hold it, else the size the protocol aimed at
        cold = next((row for row in rows if row.get("step") == "cold-0"), {})
        prompt = cold.get("prompt_tokens") or protocol.get("target_tokens")
        smaller = prefix_size_gaps(
            programme,
            profile,
            prompt if isinstance(prompt, int) else None,
            protocol.get("max_model_len"),
            protocol.get("target_tokens"),
        )
        both = Relaxations(weaker.gaps + smaller.gaps, weaker.owned + smaller.owned)
        results.append(cache_coverage(warm, CACHE_STEPS, both))
    return results


def cache_from_steps(
    evidence: BundleReader,
    profile: Profile,
    protocol: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    speed: bool = False,
    after_load: bool | None = None,
) -> list[CheckResult]:
    """The three cache checks from the protocol, the steps and the start scrape (the steps
    already held to their scrapes and records by `judge_cache`); `speed`: a warm request that
    reused tokens but was not faster is a warn; `after_load`: whether the probe after the
    sustained window is due where one ran (None: no cache config to say; `cache.after_load`
    is judged wherever its evidence is)."""
    labels = cache_labels(evidence.text(f"metrics/{START_SCRAPE}.prom"))
    logged = LoggedCache.from_json(protocol.get("startup"))
    block = block_size(labels, logged, profile.cache.block_size_hint)
    enabled = prefix_caching(labels, logged)
    steps = {row["step"]: CacheStep.from_json(row) for row in rows}
    if "cold-0" not in steps:
        return [
            CACHE_RESULT(
                "cache.prefix_reuse",
                Status.NO_DATA,
                f"the cold request's step is missing from {CACHE_STEPS}: reuse not judged",
            )
        ]
    prompt = steps["cold-0"].prompt_tokens or int(protocol["target_tokens"])
    shared_tokens = max(0, prompt - USER_TURN_TOKENS)
    mode, interval, hybrid = retention_setting(labels, logged)
    setting = CacheSetting(block or 16, mode, interval, hybrid)
    return [
        reuse_result(steps, shared_tokens, block, enabled, str(protocol.get("calibration")), speed),
        controls_result(steps, block or 16, tuple(protocol.get("controls") or ())),
        retention_result(labels, logged, block, prompt),
        *judge_after_load(evidence, steps, setting, after_load),
    ]


def cache_labels(prom_text: str | None) -> dict[str, str]:
    """The labels of `vllm:cache_config_info` in a saved scrape ({} where there is none)."""
    if prom_text is None:
        return {}
    try:
        return labels_of(parse_metrics(prom_text))
    except BadResponse:
        return {}


def labels_of(snapshot: Snapshot) -> dict[str, str]:
    info = snapshot.series("cache_config_info")
    return dict(info[0].labels) if info else {}


def block_size(
    labels: Mapping[str, str], logged: LoggedCache | None, hint: int | None
) -> int | None:
    for key in (
        "prefix_match_unit",
        "hash_block_size",
        "effective_attention_block_size",
        "block_size",
    ):
        value = labels.get(key)
        if value and value.isdigit():
            return int(value)
    if logged is not None and logged.attention_block_size:
        return logged.attention_block_size
    return hint


def prefix_caching(labels: Mapping[str, str], logged: LoggedCache | None) -> bool | None:
    if "enable_prefix_caching" in labels:
        return labels["enable_prefix_caching"] == "True"
    return logged.prefix_caching if logged is not None else None


def reuse_result(
    steps: Mapping[str, CacheStep],
    shared: int,
    block: int | None,
    enabled: bool | None,
    calibration: str,
    speed: bool = False,
) -> CheckResult:
    cold = steps["cold-0"]
    warm = [s for n, s in steps.items() if n.startswith("warm-")]
    colds = [s.ttft_s for n, s in steps.items() if n.startswith("cold-") and s.ttft_s is not None]
    test = rank_test(colds, [s.ttft_s for s in warm if s.ttft_s is not None])
    verdict = judge_reuse(cold, warm, shared, block, enabled)
    measurements: dict[str, Any] = {
        "block_size": block,
        SHARED_PREFIX_TOKENS: shared,
        "calibration": calibration,
        "enable_prefix_caching": enabled,
        COLD_PROMPT_TOKENS: cold.prompt_tokens,
        "cold_cached_tokens": cold.cached_tokens,
        "cold_d_queries": cold.queries,
        "cold_d_hits": cold.hits,
        # the API's usage field: None where the server does not report it (never 0)
        WARM_CACHED_TOKENS_MIN: _least(w.cached_tokens for w in warm),
        "warm_cached_tokens_max": _most(w.cached_tokens for w in warm),
        WARM_ENGINE_REUSED_MIN: _least(w.engine_reused for w in warm),
        "warm_engine_reused_max": _most(w.engine_reused for w in warm),
        "warm_d_hits_total": sum(w.hits or 0 for w in warm),
        "warm_d_prompt_tokens_cached_total": sum(w.cached_counter or 0 for w in warm),
        "ttft_cold_median_s": None if test is None else round(test.cold_median, 4),
        "ttft_warm_median_s": None if test is None else round(test.warm_median, 4),
        "ttft_mann_whitney_p": None if test is None else round(test.p_value, 5),
        "ttft_cliffs_delta": None if test is None else round(test.cliffs_delta, 3),
        "shared_server": verdict.shared_server,
        **_warmup_measurements(steps.get("warmup")),
    }
    timing = (
        ""
        if test is None
        else (
            f"; TTFT cold {test.cold_median:.2f} s vs warm {test.warm_median:.2f} s "
            f"(Mann-Whitney p={test.p_value:.3f}, Cliff's delta {test.cliffs_delta:+.2f})"
        )
    ) + warmup_note(steps.get("warmup"), test.cold_median if test is not None else None)
    if not verdict.accepted:
        return CACHE_RESULT(
            "cache.prefix_reuse",
            Status.FAIL,
            f"cache not accepted — {verdict.diagnosis}{timing}",
            measurements,
        )
    if verdict.shared_server:
        return CACHE_RESULT(
            "cache.prefix_reuse",
            Status.WARN,
            f"{verdict.diagnosis}{timing}; the counters also moved for traffic that is not ours "
            "(a shared server): deltas are attributed with care",
            measurements,
        )
    # not faster by the medians nor by pairs (Cliff's delta: warm is not the faster more often
    # than the slower), so timing noise around a small real gain is not called "no gain"
    if (
        speed
        and test is not None
        and test.warm_median >= test.cold_median
        and test.cliffs_delta <= 0
    ):
        # the checklist's cold/warm comparison counts: reuse that buys no time is a finding
        measurements["warm_not_faster"] = True
        return CACHE_RESULT(
            "cache.prefix_reuse",
            Status.WARN,
            f"{verdict.diagnosis}{timing}; but the warm requests were not faster than the cold "
            "one: the reused prefix bought no time to first token here (a prefix too short "
            "for this engine to matter, or the time goes elsewhere: queueing, tokenization, a "
            "gateway) — measure with the production prefix (--prefix-tokens) before relying "
            "on the cache for latency",
            measurements,
        )
    return CACHE_RESULT(
        "cache.prefix_reuse", Status.PASS, f"{verdict.diagnosis}{timing}", measurements
    )


def _warmup_measurements(warmup: CacheStep | None) -> dict[str, Any]:
    if warmup is None:
        return {}
    return {"warmup_ttft_s": warmup.ttft_s, "warmup_d_hits": warmup.hits}


def warmup_note(warmup: CacheStep | None, cold_median_s: float | None) -> str:
    """What the warm-up showed when it was much slower than a cold request: the engine
    compiled or autotuned on it, time the cold/warm comparison would otherwise have measured."""
    if warmup is None or warmup.ttft_s is None or cold_median_s is None:
        return ""
    if warmup.ttft_s < max(1.0, 3 * cold_median_s):
        return ""
    return (
        f"; the warm-up request (an unrelated prefix of the same shape) took {warmup.ttft_s:.1f} s "
        "to its first token: the engine compiled or autotuned kernels on first use, time kept "
        "out of the cold/warm comparison"
    )


def _least(values: Iterable[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _most(values: Iterable[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def controls_result(
    steps: Mapping[str, CacheStep], block: int, controls: tuple[str, ...]
) -> CheckResult:
    warm = [s.reused for n, s in steps.items() if n.startswith("warm-")]
    reference = max(warm, default=0.0)
    if reference < block:
        return CACHE_RESULT(
            "cache.controls",
            Status.NO_DATA,
            "no warm reuse to compare the controls against, so they say nothing here",
            critical=False,
        )
    found: dict[str, float | int | None] = {}
    kept = []
    for control in controls:
        step = steps.get(f"control:{control}")
        if step is None:
            return CACHE_RESULT(
                "cache.controls",
                Status.NO_DATA,
                f"the control {control!r} has no step in {CACHE_STEPS}: the controls are not "
                "judged",
                critical=False,
            )
        found[f"{control}_reused_tokens"] = step.reused
        found[f"{control}_cached_tokens"] = step.cached_tokens
        if not control_invalidated(step, reference, block):
            kept.append(control)
    parts = [
        f"{c}: {'kept' if c in kept else 'invalidated'} ({steps[f'control:{c}'].reused:g} of "
        f"{reference:g} reused)"
        for c in controls
    ]
    status = Status.PASS if not kept else Status.WARN
    summary = "; ".join(parts)
    if kept:
        summary += " — changes that kept the prefix are invisible to the cache manager here"
    return CACHE_RESULT("cache.controls", status, summary, found, critical=False)


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """What `cache.prefix_reuse` measured of golive's cache probe (None: not measured)."""

    shared_prefix_tokens: int | None
    cold_prompt_tokens: float | None
    warm_reused_tokens: float | None  # the API's cached_tokens where reported, else the engine's

    @property
    def hit_ratio(self) -> float | None:
        """The probe's warm reuse over its cold prompt (None: either is not measured)."""
        warm, cold = self.warm_reused_tokens, self.cold_prompt_tokens
        return warm / cold if warm and cold else None


def prefix_reuse(measurements: Mapping[str, object]) -> PrefixReuse:
    """`cache.prefix_reuse`'s probe figures, from a check or a verdict.json entry."""
    warm = measured_number(measurements.get(WARM_CACHED_TOKENS_MIN))
    if warm is None:
        warm = measured_number(measurements.get(WARM_ENGINE_REUSED_MIN))
    return PrefixReuse(
        measured_int(measurements.get(SHARED_PREFIX_TOKENS)),
        measured_number(measurements.get(COLD_PROMPT_TOKENS)),
        warm,
    )
