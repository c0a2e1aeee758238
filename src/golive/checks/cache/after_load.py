"""Cache under load (checklist phase four, issue 29 §4): after the sustained window, the
cache proof's warm prefix is sent once more, alone between two scrapes. Was it kept or
evicted by the load? The answer comes with the KV usage at that moment, the window's own
prefix-cache queries and hits, how long the prefix sat idle, and the retention setting.

Evidence read: the probe's record (`requests/cache.jsonl`, label `cache-after-load`), its two
scrapes (`metrics/cache-after-load-before.prom`, `-after.prom`), the warm steps it is
compared with (`metrics/cache-steps.jsonl`, already held to their scrapes) and their records
(the probe must re-send their prefix), and the sustained window's scrapes
(`metrics/capacity-sustained.json` names them).

Kept is a pass; evicted (or partly) is a `warn`: the deployment serves, but a prefix that
recurs less often than the load turns the cache over is recomputed at cold cost. The
check is not critical; where the probe was due and is missing it is `no_data`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from golive.bundle.layout import (
    AFTER_LOAD_PROBE,
    CAPACITY_SUSTAINED,
    EFFECTIVE_CONFIG,
    MEMORY_CURVE,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.checks.cache.retention import interval_unset
from golive.checks.cache.rules import CACHE_FILE, CACHE_RESULT, CacheStep, engine_reused_tokens
from golive.checks.capacity.memory_curve import read_curve
from golive.config import parse_config
from golive.errors import BundleError, ConfigError
from golive.metrics import MetricsDelta, Snapshot, vllm_snapshot
from golive.results import CheckResult, SkipReason, Status
from golive.traffic.records import reparsed

CHECK = "cache.after_load"
PROBE_LABEL = AFTER_LOAD_PROBE
BEFORE_SCRAPE = f"{AFTER_LOAD_PROBE}-before"
AFTER_SCRAPE = f"{AFTER_LOAD_PROBE}-after"
WARM_LABEL = "cache-warm-0"  # the record whose prefix the probe re-sends
PROBE_QUESTION = "Question 50: what is still open after the load?"
RECORDS = f"requests/{CACHE_FILE}.jsonl"
EVIDENCE = (RECORDS, f"metrics/{BEFORE_SCRAPE}.prom", f"metrics/{AFTER_SCRAPE}.prom")


@dataclass(frozen=True, slots=True)
class CacheSetting:
    """What the judge needs of the cache's configuration (from `judge_cache`)."""

    block: int
    mamba_cache_mode: str | None
    retention_interval: str | None
    hybrid: bool


def sustained_ran(evidence: BundleReader) -> bool:
    """A sustained window ran in this bundle (its row is here, readable or not)."""
    return evidence.text(CAPACITY_SUSTAINED) is not None


def sustained_scrapes(evidence: BundleReader) -> str | None:
    """The sustained window's scrape name (`metrics/<name>-before.prom`), None where no
    sustained window ran or its row does not name them."""
    try:
        row = evidence.json(CAPACITY_SUSTAINED)
    except BundleError:
        return None
    name = row.get("scrapes") if isinstance(row, Mapping) else None
    return name if isinstance(name, str) and name else None


def combined_gap(
    roots: Sequence[Path], checks: Sequence[CheckResult], programme: bool
) -> list[CheckResult]:
    """A programme combined from section bundles (`decide --combine`): the cache and capacity
    sections ran apart, so no probe followed the sustained window. Where a part was run under
    the rule, the missing probe is named (`no_data`), never passed over."""
    if not programme or any(c.id == CHECK for c in checks):
        return []
    readers = [BundleReader(root) for root in roots]
    if not any(map(_asks_probe, readers)) or not any(map(sustained_ran, readers)):
        return []
    return [
        _no_data(
            "a programme combined from section bundles has no probe of the warm prefix after "
            "the sustained window (the cache and capacity sections ran apart); `golive run` "
            "sends it"
        )
    ]


def _asks_probe(reader: BundleReader) -> bool:
    """A part's effective config asks for the probe, read as `golive decide` reads it (a key
    left out takes today's default)."""
    try:
        return parse_config(
            reader.text(EFFECTIVE_CONFIG) or "", EFFECTIVE_CONFIG
        ).cache.after_load_probe
    except ConfigError:
        return True  # unreadable: judged by the rule


def probe_body(records: Sequence[RequestRecordLine]) -> dict[str, Any] | None:
    """The probe: the first warm request's body with another question (the same system
    prompt and tools, so the same prefix), or None where that record or its body is gone."""
    warm = _labelled(records, WARM_LABEL)
    body = None if warm is None else warm.request
    messages = body.get("messages") if isinstance(body, Mapping) else None
    if not isinstance(body, Mapping) or not isinstance(messages, list) or not messages:
        return None
    again = copy.deepcopy(dict(body))
    again["messages"][-1] = {"role": "user", "content": PROBE_QUESTION}
    return again


def judge_after_load(
    evidence: BundleReader,
    steps: Mapping[str, CacheStep],
    setting: CacheSetting,
    due: bool | None,
) -> list[CheckResult]:
    """`cache.after_load`, where the probe's evidence is here or was due after a sustained
    window (`due`: the run's config asks for it; False: turned off, said as such; None: no
    cache config to say); else nothing. Never raises on odd evidence: what cannot
    be read is `no_data` for this check alone."""
    try:
        return _judged(evidence, steps, setting, due)
    except (BundleError, ValueError, KeyError, TypeError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        return [_no_data(f"the probe's evidence cannot be read ({why})")]


def _judged(
    evidence: BundleReader,
    steps: Mapping[str, CacheStep],
    setting: CacheSetting,
    due: bool | None,
) -> list[CheckResult]:
    records = evidence.records(RECORDS)
    probe = _labelled(records, PROBE_LABEL)
    if probe is None:
        scraped = [
            f"metrics/{name}.prom"
            for name in (BEFORE_SCRAPE, AFTER_SCRAPE)
            if evidence.text(f"metrics/{name}.prom") is not None
        ]
        if scraped:  # the probe ran: its record is gone
            return [_no_data(f"the probe's record ({PROBE_LABEL}) is missing beside {scraped}")]
        if due is None or not sustained_ran(evidence):
            return []
        if due is False:
            return [
                dataclasses.replace(
                    CACHE_RESULT(
                        CHECK,
                        Status.SKIPPED,
                        "not probed after the sustained window: cache.after_load_probe is "
                        "false in the run's config",
                        critical=False,
                        evidence=EVIDENCE,
                    ),
                    skip_reason=SkipReason.NOT_USED,
                )
            ]
        return [_no_data("the warm prefix was not probed again after the sustained window")]
    window = sustained_scrapes(evidence)
    figures: dict[str, Any] = {
        "block_size": setting.block,
        "mamba_cache_mode": setting.mamba_cache_mode,
        "retention_interval": setting.retention_interval,
        **_window_figures(evidence, window),
        "kv_cache_usage_peak_window": _window_kv_peak(evidence),
    }
    if not probe.answered:
        failure = probe.failure
        why = f"HTTP {probe.http_status}" if failure is None else msgspec.structs.asdict(failure)
        return [_no_data(f"the probe after the sustained window was not answered ({why})", figures)]
    if not _same_prefix(probe, _labelled(records, WARM_LABEL)):
        return [
            _no_data(
                f"the probe ({PROBE_LABEL}) did not re-send the warm requests' prefix (system "
                f"prompt and tools of {WARM_LABEL}): it says nothing about that prefix",
                figures,
            )
        ]
    before = vllm_snapshot(evidence.text(f"metrics/{BEFORE_SCRAPE}.prom"))
    after = vllm_snapshot(evidence.text(f"metrics/{AFTER_SCRAPE}.prom"))
    delta = None if before is None or after is None else MetricsDelta(before, after)
    reused = None if delta is None else engine_reused_tokens(delta)
    if delta is None or reused is None:
        return [
            _no_data(
                "the engine's prefix-cache counters around the probe are missing (its two "
                "scrapes, or prefix_cache_hits / prompt_tokens_cached in them)",
                figures,
            )
        ]
    parsed = reparsed(probe)
    prompt = (parsed.usage or {}).get("prompt_tokens")
    alone = _alone(delta, reused, prompt, window, evidence, before)
    if alone is not None:
        return [_no_data(alone, figures)]
    warm = [s.reused for n, s in steps.items() if n.startswith("warm-")]
    reference = min(warm, default=0.0)  # every warm request reused at least this much
    if reference < setting.block:
        return [
            _no_data(
                "the cache proof found no warm reuse, so there is nothing to find kept or "
                "evicted after the load (cache.prefix_reuse says why)",
                figures,
            )
        ]
    figures |= {
        "probe_reused_tokens": reused,
        "warm_reused_tokens": reference,
        "probe_cached_tokens": parsed.cached_tokens,
        "probe_prompt_tokens": prompt,
        "probe_ttft_s": None if parsed.ttft_ms is None else round(parsed.ttft_ms / 1000, 4),
        "kv_cache_usage_at_probe": _kv_usage(before),
        "idle_s": _idle_s(probe, records),
    }
    return [_verdict(reused, reference, setting, figures)]


def _alone(
    delta: MetricsDelta,
    reused: float,
    prompt: Any,
    window: str | None,
    evidence: BundleReader,
    before: Snapshot | None,
) -> str | None:
    """Why the probe's two scrapes do not measure the probe alone, after the window (None:
    they do). The engine counts each prompt token it looks up once: the queries between the
    scrapes are the probe's prompt, or other traffic (or other scrapes) moved them."""
    queries = delta.counter("prefix_cache_queries")
    if isinstance(prompt, int) and queries is not None and queries != prompt:
        return (
            f"the counters around the probe moved for more than the probe: {queries:g} "
            f"prefix-cache queries for its {prompt}-token prompt (other traffic on the server, "
            "or scrapes that are not the probe's); kept or evicted cannot be told"
        )
    ceiling = prompt if isinstance(prompt, int) else queries
    if ceiling is not None and reused > ceiling:
        return f"the counters say {reused:g} tokens reused by a probe of {ceiling:g}"
    if window is not None and before is not None:
        ended = vllm_snapshot(evidence.text(f"metrics/{window}-after.prom"))
        then = None if ended is None else ended.value("prefix_cache_queries")
        now = before.value("prefix_cache_queries")
        if then is not None and now is not None and now < then:
            return (
                f"the probe's first scrape counts fewer prefix-cache queries ({now:g}) than "
                f"the sustained window's last ({then:g}): it was not taken after the window "
                "(or the engine restarted in between)"
            )
    return None


def _verdict(
    reused: float, reference: float, setting: CacheSetting, figures: dict[str, Any]
) -> CheckResult:
    seen = _context(figures)
    if reused >= reference - setting.block:
        figures["state"] = "kept"
        return CACHE_RESULT(
            CHECK,
            Status.PASS,
            f"the warm prefix was kept through the load: {reused:g} of {reference:g} tokens "
            f"reused again after the sustained window ({seen})",
            figures,
            critical=False,
            evidence=EVIDENCE,
        )
    state = "evicted" if reused < setting.block else "partly evicted"
    figures["state"] = state.replace(" ", "-")
    return CACHE_RESULT(
        CHECK,
        Status.WARN,
        f"the warm prefix was {state} by the load: {reused:g} of the {reference:g} tokens the "
        f"warm requests reused were reused after the sustained window ({seen}); "
        + _retention_advice(setting, figures.get("idle_s")),
        figures,
        critical=False,
        evidence=EVIDENCE,
    )


def _retention_advice(setting: CacheSetting, idle_s: float | None) -> str:
    idle = "" if idle_s is None else f" (here {idle_s:.0f} s)"
    if setting.hybrid and interval_unset(setting.retention_interval):
        return (
            f"a hybrid cache (mamba cache mode {setting.mamba_cache_mode}) with no retention "
            "interval configured (--prefix-cache-retention-interval): the prefix's recurrent "
            "state was kept only at its prompt end and did not survive; set a retention "
            "interval, or document that a shared prefix idle that long"
            f"{idle} is recomputed at cold cost"
        )
    if setting.hybrid:
        return (
            f"a hybrid cache with retention interval {setting.retention_interval}: the load "
            f"still evicted it; a shared prefix idle that long{idle} is recomputed at cold "
            "cost — document it, or give the cache more room"
        )
    return (
        "a full-attention cache evicts idle blocks when the load needs them (it has no "
        f"retention setting): a shared prefix idle that long{idle} is recomputed at cold cost "
        "— document it, or give the KV cache more room (--gpu-memory-utilization, "
        "--kv-cache-memory-bytes)"
    )


def _context(figures: Mapping[str, Any]) -> str:
    parts = []
    if figures.get("idle_s") is not None:
        parts.append(f"idle {figures['idle_s']:.0f} s since the last warm request")
    kv, peak = figures.get("kv_cache_usage_at_probe"), figures.get("kv_cache_usage_peak_window")
    parts.append(
        ("KV usage unknown at the probe" if kv is None else f"KV usage {kv:.1%} at it")
        + ("" if peak is None else f", {peak:.1%} at most in the window")
    )
    queries, hits = figures.get("window_prefix_queries"), figures.get("window_prefix_hits")
    if queries is None or hits is None:
        parts.append("the sustained window's prefix-cache counters unknown")
    else:
        rate = f" ({hits / queries:.0%})" if queries else ""
        parts.append(f"the sustained window: {queries:g} prefix-cache queries, {hits:g} hits{rate}")
    return "; ".join(parts)


def _window_figures(evidence: BundleReader, window: str | None) -> dict[str, Any]:
    if window is None:
        return {"window_prefix_queries": None, "window_prefix_hits": None}
    before = vllm_snapshot(evidence.text(f"metrics/{window}-before.prom"))
    after = vllm_snapshot(evidence.text(f"metrics/{window}-after.prom"))
    if before is None or after is None:
        return {"window_prefix_queries": None, "window_prefix_hits": None}
    delta = MetricsDelta(before, after)
    return {
        "window_scrapes": window,
        "window_prefix_queries": delta.counter("prefix_cache_queries"),
        "window_prefix_hits": delta.counter("prefix_cache_hits"),
    }


def _window_kv_peak(evidence: BundleReader) -> float | None:
    """The highest KV-cache usage the capacity sampler saw in the sustained window."""
    text = evidence.text(MEMORY_CURVE)
    return None if text is None else read_curve(text).peak("kv_cache_usage_perc", "sustained")


def _kv_usage(snapshot: Snapshot | None) -> float | None:
    return None if snapshot is None else snapshot.value("kv_cache_usage_perc", "max")


def _idle_s(probe: RequestRecordLine, records: Sequence[RequestRecordLine]) -> float | None:
    warm = [r.started_at for r in records if r.label.startswith("cache-warm-")]
    if not warm:
        return None
    return round(probe.started_at - max(warm), 1)


def _same_prefix(probe: RequestRecordLine, warm: RequestRecordLine | None) -> bool:
    """The probe's system prompt and tools are the warm request's, byte for byte."""
    if warm is None:
        return False
    mine, theirs = probe.request, warm.request
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return False
    head = mine.get("messages") or []
    warm_head = theirs.get("messages") or []
    return (
        isinstance(head, list)
        and isinstance(warm_head, list)
        and len(head) == len(warm_head) > 0
        and head[:-1] == warm_head[:-1]
        and mine.get("tools") == theirs.get("tools")
        and mine.get("model") == theirs.get("model")
    )


def _labelled(records: Sequence[RequestRecordLine], label: str) -> RequestRecordLine | None:
    return next((r for r in records if r.label == label), None)


def _no_data(summary: str, figures: Mapping[str, Any] | None = None) -> CheckResult:
    return CACHE_RESULT(CHECK, Status.NO_DATA, summary, figures, critical=False, evidence=EVIDENCE)
