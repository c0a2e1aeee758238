"""`golive cache`: prove prefix-cache reuse with cold, warm and control requests read against
the engine's own counters (a launch flag is not acceptance).

Every request runs alone, between two metric scrapes, so each window's counter deltas belong
to that request (or reveal other traffic on a shared server).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import CACHE_PROTOCOL, CACHE_STEPS
from golive.bundle.store import BundleReader
from golive.checks.cache.after_load import (
    AFTER_SCRAPE,
    BEFORE_SCRAPE,
    PROBE_LABEL,
    RECORDS,
    probe_body,
    sustained_ran,
)
from golive.checks.cache.after_load import CHECK as AFTER_LOAD
from golive.checks.cache.judge import block_size, judge_cache, labels_of
from golive.checks.cache.rules import (
    CACHE_FILE,
    START_SCRAPE,
    CacheStep,
    LoggedCache,
    cached_prompt_tokens,
)
from golive.checks.context import CheckContext, scrape, served_model, tokens_per_word
from golive.config import GoliveConfig
from golive.evidence.startup_log import StartupFacts
from golive.metrics import MetricsDelta, Snapshot
from golive.results import CheckResult
from golive.traffic.workload import WorkloadShape, filler, tool_schemas

FILE = CACHE_FILE
CONTROLS = ("system_prompt", "whitespace", "tool_schema", "tool_order", "serialization")


@dataclass(frozen=True, slots=True)
class CacheSettings:
    prefix_tokens: int | None = None
    warm_repeats: int = 5
    cold_samples: int = 3
    startup: StartupFacts | None = None

    @classmethod
    def from_config(cls, config: GoliveConfig, startup: StartupFacts | None) -> CacheSettings:
        """The protocol as the config's `cache` section sets it, with the startup log's facts."""
        cache = config.cache
        return cls(cache.prefix_tokens, cache.warm_repeats, cache.cold_samples, startup)


class CacheProtocol:
    """Builds the protocol's requests: one salted shared prefix and single-variable controls."""

    TOOLS_FROM = 512  # below this the prefix is the system prompt alone (tools are ~300 tokens)

    def __init__(self, model: str, target_tokens: int, ratio: float, salt: str) -> None:
        self.model = model
        self.with_tools = target_tokens >= self.TOOLS_FROM
        # the prompt's tokens besides the filler: chat template, tools, the question
        self.overhead_tokens = 350 if self.with_tools else 40
        self.words = max(1, int((target_tokens - self.overhead_tokens) / ratio))
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

    def with_words(self, words: int) -> CacheProtocol:
        """The same protocol (model, salt, tools) with `words` words of filler."""
        again = copy.copy(self)
        again.words = max(1, words)
        return again

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
    """Collect the cache evidence into the bundle, then judge it from there."""
    protocol = await collect_cache(ctx, settings)
    ctx.bundle.write_json(CACHE_PROTOCOL, protocol)
    reader = BundleReader(ctx.bundle.root)
    return judge_cache(reader, ctx.profile, ctx.config.programme, ctx.config.cache)


async def probe_after_load(ctx: CheckContext) -> list[CheckResult]:
    """After the sustained window (a programme run): the warm prefix once more, alone
    between two scrapes (`cache.after_load`: kept or evicted by the load). Nothing is sent
    where the config turns it off, no sustained window ran, or the proof left no warm request
    to repeat (the judge then says what is missing)."""
    reader = BundleReader(ctx.bundle.root)
    body = probe_body(reader.records(RECORDS))
    if ctx.config.cache.after_load_probe and sustained_ran(reader) and body is not None:
        await scrape(ctx, BEFORE_SCRAPE)
        ctx.save(await ctx.target.chat(body, PROBE_LABEL), FILE)
        await scrape(ctx, AFTER_SCRAPE)
    judged = judge_cache(
        BundleReader(ctx.bundle.root), ctx.profile, ctx.config.programme, ctx.config.cache
    )
    return [c for c in judged if c.id == AFTER_LOAD]


async def collect_cache(ctx: CheckContext, settings: CacheSettings) -> dict[str, Any]:
    """Send the protocol's requests, each between two scrapes (`metrics/cache-steps.jsonl`);
    return what was resolved on the way (`metrics/cache-protocol.json`), or why it stopped."""
    served = await served_model(ctx, FILE)
    if served is None:
        return {"problem": "no served model: /v1/models did not answer"}
    model, max_model_len = served.model, served.max_model_len
    start = await scrape(ctx, START_SCRAPE)
    if start.snapshot is None:
        return {
            "problem": f"cache not judged: engine metrics unavailable ({start.problem}); reuse "
            "is never assumed from a flag",
            "evidence": [e for e in (start.evidence,) if e],
        }
    logged = logged_cache(settings.startup)
    block = block_size(labels_of(start.snapshot), logged, ctx.profile.cache.block_size_hint)
    target_tokens = settings.prefix_tokens or max(
        ctx.profile.cache.min_shared_prefix_tokens, 8 * (block or 16)
    )
    if max_model_len is not None:
        target_tokens = min(target_tokens, max_model_len - 128)
    ratio, how = await tokens_per_word(ctx, model)
    protocol = CacheProtocol(model, target_tokens, ratio, _salt())
    plan = cache_plan(protocol, settings)
    last, first = await _step(ctx, 1, *plan[0], start.snapshot)
    index = 1
    # the warm-ups' own counts size the proof where the first missed (no /tokenize, as behind
    # a gateway: the assumed ratio is 20% off on the CPU target's Qwen)
    if first is not None and first > 0 and missed(first, target_tokens):
        trial = protocol.with_words(round(protocol.words * min(4.0, target_tokens / first)))
        index += 1
        last, second = await _step(ctx, index, "warmup-2", trial.body(WARMUP_ASK, _salt()), last)
        fitted = fitted_words((protocol.words, first), (trial.words, second), target_tokens)
        words = min(fitted, 4 * trial.words)  # a count that lies cannot grow it past bounds
        protocol = protocol.with_words(words)
        how += f"; sized from the warm-ups' counts ({first}, {second} tokens): {words} words"
        plan = [plan[0], *cache_plan(protocol, settings)[1:]]
    for name, body in plan[1:]:
        index += 1
        last, _ = await _step(ctx, index, name, body, last)
    return {
        "model": model,
        "max_model_len": max_model_len,
        "target_tokens": target_tokens,
        "calibration": how,
        "controls": list(protocol.controls),
        "startup": None if logged is None else logged.to_json(),
    }


MISSED = 0.02  # a warm-up prompt further than this from its target resizes the proof
WARMUP_ASK = "Question 0: what changed today?"


def missed(prompt_tokens: int, target_tokens: int) -> bool:
    """Whether the warm-up's prompt count missed its target by more than `MISSED`."""
    return abs(prompt_tokens - target_tokens) > MISSED * target_tokens


def fitted_words(a: tuple[int, int | None], b: tuple[int, int | None], target_tokens: int) -> int:
    """The filler words that make a `target_tokens` prompt, from two (words, prompt tokens)
    counts of the same shape: the line through them (a tokenizer's count is linear in the
    filler), else the second trial's words where the counts cannot say."""
    (wa, ta), (wb, tb) = a, b
    if ta is None or tb is None or wa == wb or (tb - ta) / (wb - wa) <= 0:
        return wb
    slope = (tb - ta) / (wb - wa)
    return max(1, round(wb + (target_tokens - tb) / slope))


def logged_cache(startup: StartupFacts | None) -> LoggedCache | None:
    """The startup log's cache facts, as the judge reads them back."""
    if startup is None:
        return None
    interval = startup.arg("prefix_cache_retention_interval")
    return LoggedCache(
        startup.attention_block_size,
        startup.prefix_caching,
        startup.mamba_cache_mode,
        None if interval is None else str(interval),
    )


def cache_plan(
    protocol: CacheProtocol, settings: CacheSettings
) -> list[tuple[str, dict[str, Any]]]:
    """The requests in order. First a warm-up of the same shape behind an unrelated prefix
    (its own salt): kernels compiled or autotuned on first use (Triton JIT, KDA autotune) run
    on it, so the cold request measures the cache and not the compiler."""
    plan = [("warmup", protocol.body(WARMUP_ASK, salt=_salt()))]
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
) -> tuple[Snapshot, int | None]:
    """One request between two scrapes, its row in `metrics/cache-steps.jsonl`: (the scrape
    after it, or the one before where it failed; the prompt tokens the server counted)."""
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
    ctx.bundle.append_jsonl(CACHE_STEPS, step.to_json())
    return after.snapshot or before, step.prompt_tokens
