"""The post-start request classes beyond one text request (checklist: "What must be checked
after the server starts?"): long context, multimodal, tools with structured output, repeated
system prompt, concurrent Agent sessions and a short sustained run.

Gateway mode: with `--engine-url` beside `--target`, each class goes through both, both
payloads are saved, and a difference is placed on the gateway. Every answer is judged from
the bundle (`request_classes_judge`, `judge_sessions`, `judge_short_sustained`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext, packed
from golive.checks.gateway import asking_prompt
from golive.checks.smoke.request_classes_judge import FILE, judge_classes, long_context_target
from golive.checks.smoke.request_classes_rules import labelled, load_result
from golive.config import GoliveConfig
from golive.results import CheckResult
from golive.traffic.body_sample import BodySample
from golive.traffic.records import RequestRecord
from golive.traffic.schedule import Schedule, run_schedule
from golive.traffic.workload import (
    STRUCTURED_SCHEMA,
    AgentWorkload,
    WorkloadShape,
    filler,
    tool_schemas,
)

SUSTAINED_FILE = "smoke-sustained"
SUSTAINED_STREAM = f"requests/{SUSTAINED_FILE}.jsonl"
_PNG_1PX = (  # one red pixel
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    + "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def send(ctx: CheckContext, body: Mapping[str, Any], label: str) -> None:
    """Send through the target and, in gateway mode, straight to the engine, each asking
    for the prompt the engine rendered (`asking_prompt`); save both."""
    if ctx.engine is None:
        ctx.save(await ctx.target.chat(body, f"{label}@target"), FILE)
        return
    held = asking_prompt(body, ctx.facts.gateway_asks)
    ctx.save(await ctx.target.chat(held, f"{label}@target"), FILE)
    ctx.save(await ctx.engine.chat(held, f"{label}@engine"), FILE)


async def run_classes(
    ctx: CheckContext, model: str, max_model_len: int | None
) -> list[CheckResult]:
    """Send the classes, then judge them from the bundle as `golive decide` does."""
    await send_classes(ctx, model, max_model_len)
    return [
        *judge_classes(BundleReader(ctx.bundle.root), ctx.config, max_model_len),
        await concurrent_sessions(ctx, model),
        await short_sustained(ctx, model),
    ]


async def send_classes(ctx: CheckContext, model: str, max_model_len: int | None) -> None:
    """Long context, an image and its text-only twin, a forced tool call and a structured
    answer, and the repeats of one system prompt (every answer saved, none judged here)."""
    smoke = ctx.config.smoke
    if max_model_len is not None:
        target = long_context_target(max_model_len, smoke.long_context_fraction)
        words = max(1, int((target - 48) / 1.3))
        await send(
            ctx,
            {
                "model": model,
                "messages": [
                    {"role": "user", "content": f"Give the first word of:\n{filler(words, 99)}"}
                ],
                "max_tokens": 8,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            "long_context",
        )
    if smoke.vision:
        question = "What colour is this pixel?"
        image = [
            {"type": "text", "text": question},
            {"type": "image_url", "image_url": {"url": _PNG_1PX}},
        ]
        for content, label in ((image, "multimodal"), (question, "multimodal-text-twin")):
            body = {
                "model": model,
                "messages": [{"role": "user", "content": content}],
                "max_tokens": 16,
                "temperature": 0,
            }
            await send(ctx, body, label)
    await send(
        ctx,
        {
            "model": model,
            "messages": [{"role": "user", "content": "Look up the deployment records for item-7."}],
            "tools": tool_schemas(WorkloadShape(tools=2, tool_properties=3)),
            "tool_choice": "required",
            "max_tokens": 96,
            "temperature": 0,
        },
        "tools",
    )
    dilemma = "Should we roll out a change with failing canaries? Decide."
    await send(
        ctx,
        {
            "model": model,
            "messages": [{"role": "user", "content": dilemma}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "decision",
                    "schema": dict(STRUCTURED_SCHEMA),
                    "strict": True,
                },
            },
            "max_tokens": 96,
            "temperature": 0,
        },
        "structured",
    )
    system = "You are the release assistant. " + filler(300, 4242)
    for n in range(smoke.shared_prompt_repeats):
        body = {
            "model": model,
            "max_tokens": 8,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Ticket {n}: status?"},
            ],
        }
        await send(ctx, body, f"shared_prompt-{n}")


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
    lines = labelled(evidence.records(f"requests/{FILE}.jsonl"), "sessions")
    return load_result(
        "smoke.concurrent_sessions", lines, f"{n} concurrent multi-turn Agent sessions"
    )


def judge_short_sustained(evidence: BundleReader, config: GoliveConfig) -> CheckResult:
    """`smoke.sustained` from its own stream (plain, or compressed once its load ended)."""
    smoke = config.smoke
    result = load_result(
        "smoke.sustained",
        labelled(evidence.records(SUSTAINED_STREAM), "sustained"),
        f"{smoke.sustained_s:g} s at concurrency {smoke.sustained_concurrency}",
    )
    return dataclasses.replace(result, evidence=(SUSTAINED_STREAM,))
