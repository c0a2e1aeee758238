"""Phase 2 of `golive capacity`: the long-input ladder. Fixed samples at increasing context
up to the intended maximum, each sized with the server's own chat tokenizer where it has one,
one just above max_model_len (must be refused) and one between the last accepted and the first
refused step; the ladder is saved to `metrics/capacity-long_input.json` and judged from the
bundle (`long_input.judge_long_input`)."""

from __future__ import annotations

import time
from typing import Any

from golive.bundle.layout import CAPACITY_LADDER
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import CapacityRun, refusal
from golive.checks.capacity.context_rules import LongOutcome, LongStep, top_step
from golive.checks.capacity.long_input import judge_long_input
from golive.checks.context import chat_tokens, tokens_per_word
from golive.results import CheckResult
from golive.traffic.records import ParsedResponse, error_message, parse
from golive.traffic.workload import filler

_CONTEXT_ERROR = ("maximum context length", "max_model_len", "context length", "too long")
_TEMPLATE_OVERHEAD = 32  # chat-template tokens around one user message
FRACTIONS = (0.125, 0.25, 0.5, 0.75, 1.0)


def _long_body(run: CapacityRun, words: int, n: int) -> dict[str, Any]:
    return {
        "model": run.model,
        "messages": [
            {"role": "user", "content": f"Summarise in one line:\n{filler(words, 50_000 + n)}"}
        ],
        "max_tokens": run.ctx.config.capacity.long_max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def sized_body(run: CapacityRun, context: int, ratio: float, n: int) -> dict[str, Any]:
    """A request of `context` tokens in all: prompt + max_tokens. The prompt is sized with
    the server's own chat tokenizer where it has one, so the top step of the ladder fits
    max_model_len exactly instead of overshooting it by the estimate's error."""
    want = context - run.ctx.config.capacity.long_max_tokens
    words = max(1, int((want - _TEMPLATE_OVERHEAD) / ratio))
    body = _long_body(run, words, n)
    for _ in range(3):  # corrections from the server's own count, never above the target
        counted = await chat_tokens(run.ctx, run.model, body["messages"])
        if not counted or want - 8 <= counted <= want:
            break
        words = max(1, int(words * want / counted) - (1 if counted > want else 0))
        body = _long_body(run, words, n)
    return body


async def _long_step(run: CapacityRun, context: int, ratio: float, n: int) -> LongStep:
    body = await sized_body(run, context, ratio, n)
    parsed = parse(await run.send(body, f"long-{context}", time.perf_counter_ns()))
    outcome, detail = _long_outcome(parsed)
    if outcome is LongOutcome.FAILED and not await run.check_alive(detail):
        outcome = LongOutcome.DIED
    return LongStep(context, outcome, detail, (parsed.usage or {}).get("prompt_tokens"))


def between(steps: list[LongStep], max_context: int) -> int | None:
    """A step between the largest accepted input and the first one refused inside the
    envelope, so a limit is not a coarse ladder rung (None: no gap worth a step)."""
    refused = sorted(
        s.context_tokens
        for s in steps
        if s.outcome is LongOutcome.REJECTED and s.context_tokens <= max_context
    )
    if not refused:
        return None
    below = [
        s.context_tokens
        for s in steps
        if s.outcome is LongOutcome.ACCEPTED and s.context_tokens < refused[0]
    ]
    if not below or refused[0] - max(below) < 128:
        return None
    return (max(below) + refused[0]) // 2


async def long_input(run: CapacityRun) -> CheckResult:
    """Phase 2: fixed samples at increasing context up to the intended maximum (prompt plus
    generation), one just above max_model_len (must be refused), and one between the last
    accepted and the first refused step."""
    config = run.ctx.config.capacity
    max_context = config.max_context or run.max_model_len or 4096
    ratio, how = await tokens_per_word(run.ctx, run.model)
    top = top_step(max_context, run.max_model_len)
    contexts = sorted({int(top * f) for f in FRACTIONS})
    if run.max_model_len is not None:
        contexts.append(run.max_model_len + 64)
    run.inputs.progress.phase("long input", requests=len(set(contexts)))
    steps: list[LongStep] = []
    for n, context in enumerate(sorted(set(contexts))):
        steps.append(await _long_step(run, context, ratio, n))
        if steps[-1].outcome is LongOutcome.DIED:
            break
    mid = None if run.dead.is_set() else between(steps, max_context)
    if mid is not None:
        steps.append(await _long_step(run, mid, ratio, len(steps)))
    recovered = run.dead.is_set() is False and await run.check_alive("health after long inputs")
    run.ctx.bundle.write_json(
        CAPACITY_LADDER,
        {
            "max_context": max_context,
            "max_model_len": run.max_model_len,
            "top_step": top,
            "tokens_per_word": ratio,
            "calibration": how,
            "generation_limit": config.long_max_tokens,
            "recovered_after_rejections": recovered,
            "steps": [
                {
                    "context_tokens": s.context_tokens,
                    "outcome": s.outcome.value,
                    "detail": s.detail,
                    "prompt_tokens": s.prompt_tokens,
                }
                for s in steps
            ],
        },
    )
    return judge_long_input(BundleReader(run.ctx.bundle.root), config)


def _long_outcome(parsed: ParsedResponse) -> tuple[LongOutcome, str]:
    record = parsed.record
    if record.ok and not parsed.problems:
        return LongOutcome.ACCEPTED, "served"
    message = error_message(parsed.json_body) or (record.failure.message if record.failure else "")
    if record.status == 400 and any(k in message.lower() for k in _CONTEXT_ERROR):
        return LongOutcome.REJECTED, message[:200]
    if record.refused:
        return LongOutcome.REFUSED, refusal(parsed)
    return LongOutcome.FAILED, (message or "; ".join(parsed.problems))[:200]
