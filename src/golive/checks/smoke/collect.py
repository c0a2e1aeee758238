"""Post-start smoke: the server is vLLM, serves the model, answers a standard text request
streamed and not, and its own metrics count that traffic.

A reachable process is not acceptance; these checks only establish that the deeper
programme can start. Every request and both metric windows are saved in the bundle, and the
checks are judged from there (`smoke.judge`), as `golive decide` judges them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import SMOKE_DELTA, SMOKE_PLAN, SMOKE_REQUESTS
from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext, Scrape, ServedModel, scrape
from golive.checks.smoke.judge import TEXT_CHECKS, judge_smoke, listed_model, saved_models
from golive.checks.smoke.request_classes_judge import judge_smoke_coverage
from golive.results import CheckResult


@dataclass(frozen=True, slots=True)
class SmokePlan:
    """What smoke's collector takes besides the context: nothing (its settings are the
    config's `smoke` section), so every family's `collect` has the same shape."""


async def run_smoke(ctx: CheckContext) -> list[CheckResult]:
    """The smoke checks, in order; never raises for anything the target does."""
    before = await scrape(ctx, "smoke-before")
    for path, label in (("/health", "health"), ("/version", "version"), ("/v1/models", "models")):
        ctx.save(await ctx.target.get(path, label), "smoke")
    model = _served_model(ctx)
    if model is not None:
        for check_id in TEXT_CHECKS:
            stream = check_id == "smoke.text_stream"
            body = text_request(ctx, model, stream)
            # a plain answer's first byte is the whole (short) answer: the first-byte limit
            # and half a second a token bound it whole (a streamed answer's first byte is
            # bounded in the client)
            config = ctx.config
            deadline = (
                None
                if stream
                else config.client.first_byte_timeout_s + 0.5 * config.smoke.max_tokens
            )
            ctx.save(await ctx.target.chat(body, check_id, deadline_s=deadline), "smoke")
    after = await scrape(ctx, "smoke-after")
    ctx.bundle.write_json(
        SMOKE_PLAN, {"scrapes": {"before": _noted(before), "after": _noted(after)}}
    )
    results = judge_smoke(BundleReader(ctx.bundle.root), ctx.config)
    metrics = next(r for r in results if r.id == "smoke.metrics")
    if SMOKE_DELTA in metrics.evidence:
        ctx.bundle.write_json(SMOKE_DELTA, metrics.measurements)
    listed = next(r for r in results if r.id == "smoke.models")
    max_len = listed_model(listed.measurements).max_model_len
    if model is not None:  # the families after smoke send to this model: no second ask
        ctx.facts.served = ServedModel(model, max_len, SMOKE_REQUESTS)
    if ctx.config.smoke.classes and model is not None:
        from golive.checks.smoke.request_classes import run_classes

        results += await run_classes(ctx, model, max_len)
    return results + judge_smoke_coverage(BundleReader(ctx.bundle.root), ctx.config)


def _served_model(ctx: CheckContext) -> str | None:
    """The model the text requests go to: the one smoke.models accepts from the answer just
    saved (the configured one if served, else the first listed)."""
    listed = saved_models(BundleReader(ctx.bundle.root), ctx.config.target.model)
    return listed_model(listed.measurements).model


def _noted(scraped: Scrape) -> dict[str, Any]:
    """What the judge needs of a scrape beyond its saved text: where it is, and why there is
    no snapshot where the collector had none (unreachable, an HTTP error, not vLLM's)."""
    return {
        "evidence": scraped.evidence,
        "problem": None if scraped.snapshot is not None else scraped.problem,
        "taken_at": None if scraped.snapshot is None else scraped.snapshot.taken_at,
    }


def text_request(ctx: CheckContext, model: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a concise, factual assistant."},
            {"role": "user", "content": ctx.config.smoke.prompt},
        ],
        "max_tokens": ctx.config.smoke.max_tokens,
        "temperature": ctx.config.smoke.temperature,
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body
