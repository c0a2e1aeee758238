"""`golive cache`: prove prefix-cache reuse with cold, warm and control requests read against
the engine's own counters (a launch flag is not acceptance).

Every request runs alone, between two metric scrapes, so each window's counter deltas belong
to that request (or reveal other traffic on a shared server).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from golive.checks.cache_retention import retention_result
from golive.checks.cache_rules import (
    CACHE_FILE,
    CacheStep,
    cached_prompt_tokens,
    control_invalidated,
    judge_reuse,
    rank_test,
)
from golive.checks.cache_rules import (
    cache_result as _r,
)
from golive.checks.capacity import served_model
from golive.checks.context import CheckContext, scrape, tokens_per_word
from golive.evidence.startup_log import StartupFacts
from golive.metrics import MetricsDelta, Snapshot
from golive.results import CheckResult, Status
from golive.traffic.workload import WorkloadShape, filler, tool_schemas

FILE = CACHE_FILE
CONTROLS = ("system_prompt", "whitespace", "tool_schema", "tool_order", "serialization")


@dataclass(frozen=True, slots=True)
class CacheSettings:
    prefix_tokens: int | None = None
    warm_repeats: int = 5
    cold_samples: int = 3
    startup: StartupFacts | None = None


class CacheProtocol:
    """Builds the protocol's requests: one salted shared prefix and single-variable controls."""

    TOOLS_FROM = 512  # below this the prefix is the system prompt alone (tools are ~300 tokens)

    def __init__(self, model: str, target_tokens: int, ratio: float, salt: str) -> None:
        self.model = model
        self.with_tools = target_tokens >= self.TOOLS_FROM
        overhead = 350 if self.with_tools else 40
        self.words = max(1, int((target_tokens - overhead) / ratio))
        self.salt = salt
        self.tools = (
            tool_schemas(WorkloadShape(tools=2, tool_properties=3)) if self.with_tools else []
        )

    @property
    def controls(self) -> tuple[str, ...]:
        return CONTROLS if self.with_tools else ("system_prompt", "whitespace")

    def system(self, salt: str, variant: str = "") -> str:
        head = {
            "system_prompt": f"[{salt}] NOTE: revised policy. ",
            "whitespace": f"[{salt}]  ",
        }.get(variant, f"[{salt}] ")
        return (
            head
            + "You are the on-call assistant for the payments platform. "
            + filler(self.words, 31337)
        )

    def tool_set(self, variant: str = "") -> list[dict[str, Any]]:
        tools = copy.deepcopy(self.tools)
        if variant == "tool_schema":
            tools[0]["function"]["description"] += " Results are cached for five minutes."
        elif variant == "tool_order":
            tools.reverse()
        elif variant == "serialization":
            params = tools[0]["function"]["parameters"]
            params["properties"] = dict(reversed(list(params["properties"].items())))
        return tools

    def body(self, user: str, salt: str | None = None, variant: str = "") -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self.system(salt or self.salt, variant)},
                {"role": "user", "content": user},
            ],
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.tools:
            body["tools"] = self.tool_set(variant)
            body["tool_choice"] = "none"
        return body


async def run_cache(ctx: CheckContext, settings: CacheSettings) -> list[CheckResult]:
    model, max_model_len = await served_model(ctx, FILE)
    if model is None:
        return [
            _r(
                "cache.prefix_reuse",
                True,
                Status.NO_DATA,
                "no served model: /v1/models did not answer",
            )
        ]
    start = await scrape(ctx, "cache-00-start")
    if start.snapshot is None:
        return [
            _r(
                "cache.prefix_reuse",
                True,
                Status.NO_DATA,
                f"cache not judged: engine metrics unavailable ({start.problem}); reuse is never "
                "assumed from a flag",
                evidence=tuple(e for e in (start.evidence,) if e),
            )
        ]
    labels = _cache_labels(start.snapshot)
    block = _block_size(labels, settings.startup, ctx.profile.cache.block_size_hint)
    enabled = _enabled(labels, settings.startup)
    target_tokens = settings.prefix_tokens or max(
        ctx.profile.cache.min_shared_prefix_tokens, 8 * (block or 16)
    )
    if max_model_len is not None:
        target_tokens = min(target_tokens, max_model_len - 128)
    ratio, how = await tokens_per_word(ctx, model)
    protocol = CacheProtocol(model, target_tokens, ratio, _salt())
    steps: dict[str, CacheStep] = {}
    last = start.snapshot
    plan = cache_plan(protocol, settings)
    for index, (name, body) in enumerate(plan, start=1):
        step, last = await _step(ctx, index, name, body, last)
        steps[name] = step
    prompt = steps["cold-0"].prompt_tokens or target_tokens
    shared_tokens = max(0, prompt - 24)  # everything but the user turn is shared with warm
    return [
        reuse_result(steps, shared_tokens, block, enabled, how),
        _controls_result(steps, block or 16, protocol.controls),
        retention_result(labels, settings.startup, block, prompt),
    ]


def cache_plan(
    protocol: CacheProtocol, settings: CacheSettings
) -> list[tuple[str, dict[str, Any]]]:
    """The requests in order. First a warm-up of the same shape behind an unrelated prefix
    (its own salt): kernels compiled or autotuned on first use (Triton JIT, KDA autotune) run
    on it, so the cold request measures the cache and not the compiler."""
    plan = [("warmup", protocol.body("Question 0: what changed today?", salt=_salt()))]
    plan.append(("cold-0", protocol.body("Question 0: what changed today?")))
    plan += [
        (f"warm-{i}", protocol.body(f"Question {i + 1}: list the open incidents."))
        for i in range(settings.warm_repeats)
    ]
    plan += [
        (f"control:{c}", protocol.body("Question 99: summarise the policy.", variant=c))
        for c in protocol.controls
    ]
    plan += [
        (f"cold-{i}", protocol.body("Question 0: what changed today?", salt=_salt()))
        for i in range(1, settings.cold_samples)
    ]
    return plan


def _salt() -> str:
    return uuid.uuid4().hex[:12]


async def _step(
    ctx: CheckContext, index: int, name: str, body: dict[str, Any], before: Snapshot
) -> tuple[CacheStep, Snapshot]:
    parsed = ctx.save(await ctx.target.chat(body, f"cache-{name}"), FILE)
    after = await scrape(ctx, f"cache-{index:02d}-after-{name.replace(':', '-')}")
    delta = MetricsDelta(before, after.snapshot) if after.snapshot is not None else None
    step = CacheStep(
        name=name,
        prompt_tokens=(parsed.usage or {}).get("prompt_tokens"),
        cached_tokens=parsed.cached_tokens,
        ttft_s=None if parsed.ttft_ms is None else parsed.ttft_ms / 1000,
        queries=None if delta is None else delta.counter("prefix_cache_queries"),
        hits=None if delta is None else delta.counter("prefix_cache_hits"),
        cached_counter=None if delta is None else cached_prompt_tokens(delta),
        ok=parsed.record.ok and not parsed.problems,
    )
    ctx.bundle.append_jsonl("metrics/cache-steps.jsonl", step.to_json())
    return step, after.snapshot or before


def _cache_labels(snapshot: Snapshot) -> dict[str, str]:
    info = snapshot.series("cache_config_info")
    return dict(info[0].labels) if info else {}


def _block_size(
    labels: Mapping[str, str], startup: StartupFacts | None, hint: int | None
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
    if startup is not None and startup.attention_block_size:
        return startup.attention_block_size
    return hint


def _enabled(labels: Mapping[str, str], startup: StartupFacts | None) -> bool | None:
    if "enable_prefix_caching" in labels:
        return labels["enable_prefix_caching"] == "True"
    return startup.prefix_caching if startup is not None else None


def reuse_result(
    steps: Mapping[str, CacheStep],
    shared: int,
    block: int | None,
    enabled: bool | None,
    calibration: str,
) -> CheckResult:
    cold = steps["cold-0"]
    warm = [s for n, s in steps.items() if n.startswith("warm-")]
    colds = [s.ttft_s for n, s in steps.items() if n.startswith("cold-") and s.ttft_s is not None]
    test = rank_test(colds, [s.ttft_s for s in warm if s.ttft_s is not None])
    verdict = judge_reuse(cold, warm, shared, block, enabled)
    measurements: dict[str, Any] = {
        "block_size": block,
        "shared_prefix_tokens": shared,
        "calibration": calibration,
        "enable_prefix_caching": enabled,
        "cold_prompt_tokens": cold.prompt_tokens,
        "cold_cached_tokens": cold.cached_tokens,
        "cold_d_queries": cold.queries,
        "cold_d_hits": cold.hits,
        # the API's usage field: None where the server does not report it (never 0)
        "warm_cached_tokens_min": _least(w.cached_tokens for w in warm),
        "warm_cached_tokens_max": _most(w.cached_tokens for w in warm),
        "warm_engine_reused_min": _least(w.engine_reused for w in warm),
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
        return _r(
            "cache.prefix_reuse",
            True,
            Status.FAIL,
            f"cache not accepted — {verdict.diagnosis}{timing}",
            measurements,
        )
    if verdict.shared_server:
        return _r(
            "cache.prefix_reuse",
            True,
            Status.WARN,
            f"{verdict.diagnosis}{timing}; the counters also moved for traffic that is not ours "
            "(a shared server): deltas are attributed with care",
            measurements,
        )
    return _r("cache.prefix_reuse", True, Status.PASS, f"{verdict.diagnosis}{timing}", measurements)


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


def _controls_result(
    steps: Mapping[str, CacheStep], block: int, controls: tuple[str, ...]
) -> CheckResult:
    warm = [s.reused for n, s in steps.items() if n.startswith("warm-")]
    reference = max(warm, default=0.0)
    if reference < block:
        return _r(
            "cache.controls",
            False,
            Status.NO_DATA,
            "no warm reuse to compare the controls against, so they say nothing here",
        )
    found: dict[str, float | int | None] = {}
    kept = []
    for control in controls:
        step = steps[f"control:{control}"]
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
    return _r("cache.controls", False, status, summary, found)
