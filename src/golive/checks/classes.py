"""The post-start request classes beyond one text request (checklist: "What must be checked
after the server starts?"): long context, multimodal, tools with structured output, repeated
system prompt, concurrent Agent sessions and a short sustained run.

Gateway mode: with `--engine-url` beside `--target`, each class goes through both, both
payloads are saved, and a difference is placed on the gateway.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import jsonschema

from golive.bundle import BundleReader
from golive.checks.classes_rules import (
    answer_text,
    gateway_difference,
    judge_multimodal,
    judge_shared_prompt,
    labelled,
    load_result,
    smoke_result,
)
from golive.checks.context import CheckContext, packed, transport_problem
from golive.config import GoliveConfig
from golive.results import CheckResult, Status
from golive.scope import NOT_USED
from golive.traffic.records import BodySample, ParsedResponse, RequestRecord
from golive.traffic.schedule import Schedule, run_schedule
from golive.traffic.workload import (
    STRUCTURED_SCHEMA,
    AgentWorkload,
    WorkloadShape,
    filler,
    tool_schemas,
)

FILE = "smoke-classes"
SUSTAINED_FILE = "smoke-sustained"
SUSTAINED_STREAM = f"requests/{SUSTAINED_FILE}.jsonl"
_PNG_1PX = (  # one red pixel
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    + "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def send(
    ctx: CheckContext, body: Mapping[str, Any], label: str
) -> tuple[ParsedResponse, ParsedResponse | None]:
    """Send through the target and, in gateway mode, straight to the engine; save both."""
    via_target = ctx.save(await ctx.target.chat(body, f"{label}@target"), FILE)
    if ctx.engine is None:
        return via_target, None
    via_engine = ctx.save(await ctx.engine.chat(body, f"{label}@engine"), FILE)
    return via_target, via_engine


def _failed(check_id: str, parsed: ParsedResponse, what: str) -> CheckResult | None:
    problem = transport_problem(parsed, what)
    if problem:
        return smoke_result(check_id, *problem)
    if parsed.problems:
        return smoke_result(check_id, Status.FAIL, f"{what}: {'; '.join(parsed.problems)}")
    return None


async def run_classes(
    ctx: CheckContext, model: str, max_model_len: int | None
) -> list[CheckResult]:
    return [
        await long_context(ctx, model, max_model_len),
        await multimodal(ctx, model),
        await tools_structured(ctx, model),
        await shared_prompt(ctx, model),
        await concurrent_sessions(ctx, model),
        await short_sustained(ctx, model),
    ]


async def long_context(ctx: CheckContext, model: str, max_model_len: int | None) -> CheckResult:
    if max_model_len is None:
        return smoke_result(
            "smoke.long_context",
            Status.NO_DATA,
            "max_model_len unknown: cannot size a long-context request",
        )
    target = int(max_model_len * ctx.config.smoke.long_context_fraction)
    words = max(1, int((target - 48) / 1.3))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Give the first word of:\n{filler(words, 99)}"}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    parsed, engine = await send(ctx, body, "long_context")
    failure = _failed("smoke.long_context", parsed, f"~{target}-token request")
    if failure:
        return failure
    usage = parsed.usage or {}
    measurements = {
        "prompt_tokens": usage.get("prompt_tokens"),
        "max_model_len": max_model_len,
        "ttft_ms": parsed.ttft_ms,
        "e2e_ms": parsed.e2e_ms,
    }
    if diff := gateway_difference(parsed, engine):
        return smoke_result(
            "smoke.long_context",
            Status.FAIL,
            f"the gateway altered the answer: {diff}",
            measurements,
        )
    return smoke_result(
        "smoke.long_context",
        Status.PASS,
        f"{usage.get('prompt_tokens')}-token input served, first token {parsed.ttft_ms:.0f} ms",
        measurements,
    )


async def multimodal(ctx: CheckContext, model: str) -> CheckResult:
    if not ctx.config.smoke.vision:
        return smoke_result(
            "smoke.multimodal",
            Status.SKIPPED,
            "the config says the application sends no images (smoke.vision: false)",
            {"skip_reason": NOT_USED},
            critical=False,
        )
    body = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colour is this pixel?"},
                    {"type": "image_url", "image_url": {"url": _PNG_1PX}},
                ],
            }
        ],
        "max_tokens": 16,
        "temperature": 0,
    }
    parsed, engine = await send(ctx, body, "multimodal")
    failure = _failed("smoke.multimodal", parsed, "image request")
    if failure:
        return failure
    if diff := gateway_difference(parsed, engine):
        return smoke_result(
            "smoke.multimodal", Status.FAIL, f"the gateway altered the answer: {diff}"
        )
    text_only = {**body, "messages": [{"role": "user", "content": "What colour is this pixel?"}]}
    twin, _ = await send(ctx, text_only, "multimodal-text-twin")
    if failure := _failed("smoke.multimodal", twin, "the same request without the image"):
        return failure
    return judge_multimodal(parsed, twin)


async def tools_structured(ctx: CheckContext, model: str) -> CheckResult:
    """One forced tool call (arguments valid against the schema) and one structured answer."""
    tools = tool_schemas(WorkloadShape(tools=2, tool_properties=3))
    tool_body = {
        "model": model,
        "messages": [{"role": "user", "content": "Look up the deployment records for item-7."}],
        "tools": tools,
        "tool_choice": "required",
        "max_tokens": 96,
        "temperature": 0,
    }
    structured_body = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": "Should we roll out a change with failing canaries? Decide.",
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "decision", "schema": dict(STRUCTURED_SCHEMA), "strict": True},
        },
        "max_tokens": 96,
        "temperature": 0,
    }
    problems: list[str] = []
    tool, tool_engine = await send(ctx, tool_body, "tools")
    structured, structured_engine = await send(ctx, structured_body, "structured")
    for parsed, what in ((tool, "tool request"), (structured, "structured request")):
        if failure := _failed("smoke.tools_structured", parsed, what):
            return failure
    calls = ((tool.completion or {}).get("choices") or [{}])[0].get("message", {}).get(
        "tool_calls"
    ) or []
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if not calls:
        problems.append("tool_choice=required returned no tool_calls")
    for call in calls:
        fn = call.get("function") or {}
        problems += _validate(
            f"tool {fn.get('name')!r} arguments", fn.get("arguments"), schemas.get(fn.get("name"))
        )
    content = (
        ((structured.completion or {}).get("choices") or [{}])[0].get("message", {}).get("content")
    )
    problems += _validate("structured output", content, dict(STRUCTURED_SCHEMA))
    for a, b in ((tool, tool_engine), (structured, structured_engine)):
        if diff := gateway_difference(a, b):
            problems.append(f"the gateway altered the answer: {diff}")
    measurements = {"tool_calls": len(calls)}
    if problems:
        return smoke_result(
            "smoke.tools_structured", Status.FAIL, "; ".join(problems), measurements
        )
    return smoke_result(
        "smoke.tools_structured",
        Status.PASS,
        f"{len(calls)} tool call(s) and the structured answer validate against their schemas",
        measurements,
    )


def _validate(what: str, raw: Any, schema: Mapping[str, Any] | None) -> list[str]:
    if schema is None:
        return [f"{what}: the function is not in the request's tool set"]
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return [f"{what} are not JSON ({exc.msg}): {str(raw)[:80]!r}"]
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return [f"{what} break the schema: {exc.message}"]
    return []


async def shared_prompt(ctx: CheckContext, model: str) -> CheckResult:
    """Several requests with one system prompt; the cached-token counts are recorded."""
    system = "You are the release assistant. " + filler(300, 4242)
    cached: list[int | None] = []
    prompts: list[int | None] = []
    answers: list[str] = []
    for n in range(ctx.config.smoke.shared_prompt_repeats):
        body = {
            "model": model,
            "max_tokens": 8,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Ticket {n}: status?"},
            ],
        }
        parsed, engine = await send(ctx, body, f"shared_prompt-{n}")
        if failure := _failed("smoke.shared_prompt", parsed, f"repeat {n}"):
            return failure
        if diff := gateway_difference(parsed, engine):
            return smoke_result(
                "smoke.shared_prompt", Status.FAIL, f"the gateway altered the answer: {diff}"
            )
        cached.append(parsed.cached_tokens)
        prompts.append((parsed.usage or {}).get("prompt_tokens"))
        answers.append(answer_text(parsed))
    return judge_shared_prompt(prompts, cached, answers)


async def _load(
    ctx: CheckContext,
    model: str,
    concurrency: int,
    duration_s: float,
    cap: int,
    label: str,
    stream: str = FILE,
    sample: BodySample | None = None,
) -> list[RequestRecord]:
    shape = WorkloadShape(system_prompt_words=120, tools=2, turns=2, long_share=0.0, max_tokens=12)
    workload = AgentWorkload(shape, model)

    async def send_one(body: Mapping[str, Any], lbl: str, scheduled_ns: int) -> RequestRecord:
        record = await ctx.target.chat(body, lbl, scheduled_ns)
        ctx.save(record, stream, sample)
        return record

    result = await run_schedule(
        Schedule(
            "concurrency",
            duration_s=duration_s,
            max_requests=cap,
            concurrency=concurrency,
            drain_s=120,
        ),
        send_one,
        workload.body,
        label,
        abort=ctx.target.abort_in_flight,
    )
    return list(result.records)


async def concurrent_sessions(ctx: CheckContext, model: str) -> CheckResult:
    n = ctx.config.smoke.concurrent_sessions
    await _load(ctx, model, n, 600.0, n, "sessions")
    return judge_sessions(BundleReader(ctx.bundle.root), ctx.config)


async def short_sustained(ctx: CheckContext, model: str) -> CheckResult:
    """Thousands of requests on a GPU: saved in a stream of their own, bodies sampled and the
    stream compressed like the capacity phases' (`records` in the config)."""
    smoke = ctx.config.smoke
    await _load(
        ctx,
        model,
        smoke.sustained_concurrency,
        smoke.sustained_s,
        10_000,
        "sustained",
        SUSTAINED_FILE,
        ctx.body_sample(),
    )
    result = judge_short_sustained(BundleReader(ctx.bundle.root), ctx.config)
    return packed(ctx, result, SUSTAINED_STREAM)


def judge_sessions(evidence: BundleReader, config: GoliveConfig) -> CheckResult:
    """`smoke.concurrent_sessions` from the `sessions` lines of the classes' stream."""
    n = config.smoke.concurrent_sessions
    lines = labelled(evidence.jsonl(f"requests/{FILE}.jsonl"), "sessions")
    return load_result(
        "smoke.concurrent_sessions", lines, f"{n} concurrent multi-turn Agent sessions"
    )


def judge_short_sustained(evidence: BundleReader, config: GoliveConfig) -> CheckResult:
    """`smoke.sustained` from its own stream (plain, or compressed once its load ended)."""
    smoke = config.smoke
    result = load_result(
        "smoke.sustained",
        labelled(evidence.jsonl(SUSTAINED_STREAM), "sustained"),
        f"{smoke.sustained_s:g} s at concurrency {smoke.sustained_concurrency}",
    )
    return dataclasses.replace(result, evidence=(SUSTAINED_STREAM,))
