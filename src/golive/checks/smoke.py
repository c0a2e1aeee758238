"""Post-start smoke: the server is vLLM, serves the model, answers a standard text request
streamed and not, and its own metrics count that traffic.

A reachable process is not acceptance; these checks only establish that the deeper
programme can start. Every request and both metric windows are saved in the bundle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from golive.checks.context import CheckContext, Scrape, scrape, transport_problem
from golive.metrics import MetricsDelta
from golive.results import CheckClass, CheckResult, Status

EVIDENCE = "requests/smoke.jsonl"


def _result(
    check_id: str,
    status: Status,
    summary: str,
    measurements: Mapping[str, float | int | str | bool | None] | None = None,
    evidence: tuple[str, ...] = (EVIDENCE,),
) -> CheckResult:
    return CheckResult(
        id=check_id,
        check_class=CheckClass.SMOKE,
        critical=True,
        status=status,
        summary=summary,
        measurements=dict(measurements or {}),
        evidence=evidence,
    )


async def run_smoke(ctx: CheckContext) -> list[CheckResult]:
    """The smoke checks, in order; never raises for anything the target does."""
    before = await scrape(ctx, "smoke-before")
    health = await check_health(ctx)
    version = await check_version(ctx)
    models, model = await check_models(ctx)
    texts = [await check_text(ctx, model, stream=stream) for stream in (False, True)]
    after = await scrape(ctx, "smoke-after")
    served = sum(1 for r in texts if r.status is Status.PASS)
    results = [health, version, models, *texts, check_metrics(ctx, before, after, served)]
    if ctx.config.smoke.classes and model is not None:
        from golive.checks.classes import run_classes

        max_len = models.measurements.get("max_model_len")
        results += await run_classes(ctx, model, max_len if isinstance(max_len, int) else None)
    return results


async def check_health(ctx: CheckContext) -> CheckResult:
    parsed = ctx.save(await ctx.target.get("/health", "health"), "smoke")
    problem = transport_problem(parsed, "/health")
    if problem:
        return _result("smoke.health", *problem)
    return _result(
        "smoke.health",
        Status.PASS,
        f"/health answered {parsed.record.status} in {parsed.e2e_ms:.0f} ms",
        {"http_status": parsed.record.status, "latency_ms": parsed.e2e_ms},
    )


async def check_version(ctx: CheckContext) -> CheckResult:
    parsed = ctx.save(await ctx.target.get("/version", "version"), "smoke")
    problem = transport_problem(parsed, "/version (is this a vLLM server?)")
    if problem:
        return _result("smoke.version", *problem)
    body = parsed.json_body
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str):
        return _result(
            "smoke.version",
            Status.FAIL,
            f"/version did not return vLLM's {{'version': ...}}: {parsed.record.raw_text[:120]!r}",
        )
    try:
        Version(version)
    except InvalidVersion:
        return _result(
            "smoke.version",
            Status.FAIL,
            f"/version says {version[:80]!r}, which is not a package version (vLLM reports e.g. "
            "'0.32.0' or '0.11.1rc2.dev12+gabc'): the server is not vLLM, or hides its build",
            {"vllm_version": version[:80]},
        )
    return _result(
        "smoke.version", Status.PASS, f"vLLM reports version {version}", {"vllm_version": version}
    )


async def check_models(ctx: CheckContext) -> tuple[CheckResult, str | None]:
    """List served models; the configured model must be among them (or the first is used)."""
    parsed = ctx.save(await ctx.target.get("/v1/models", "models"), "smoke")
    wanted = ctx.config.target.model
    problem = transport_problem(parsed, "/v1/models")
    if problem:
        return _result("smoke.models", *problem), None
    body = parsed.json_body
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not entries:
        return _result("smoke.models", Status.FAIL, "/v1/models lists no models"), None
    served = [str(e.get("id")) for e in entries if isinstance(e, dict)]
    model = wanted or served[0]
    if model not in served:
        return (
            _result(
                "smoke.models",
                Status.FAIL,
                f"model {model!r} is not served here; served: {', '.join(served)} "
                "(fix --model or target.model)",
                {"served": ", ".join(served)},
            ),
            None,
        )
    entry = entries[served.index(model)]
    max_len = entry.get("max_model_len")
    return (
        _result(
            "smoke.models",
            Status.PASS,
            f"serves {model!r} (max_model_len {max_len})",
            {"model": model, "max_model_len": max_len if isinstance(max_len, int) else None},
        ),
        model,
    )


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


async def check_text(ctx: CheckContext, model: str | None, stream: bool) -> CheckResult:
    check_id = "smoke.text_stream" if stream else "smoke.text"
    mode = "streamed" if stream else "non-streamed"
    if model is None:
        return _result(check_id, Status.NO_DATA, f"no {mode} request sent: no served model known")
    record = await ctx.target.chat(text_request(ctx, model, stream), check_id)
    parsed = ctx.save(record, "smoke")
    problem = transport_problem(parsed, f"{mode} text request")
    if problem:
        return _result(check_id, *problem)
    completion = parsed.completion or {}
    choices = completion.get("choices") or [{}]
    message = choices[0].get("message") or {}
    finish = choices[0].get("finish_reason")
    usage = parsed.usage or {}
    measurements = {
        "http_status": record.status,
        "ttft_ms": parsed.ttft_ms,
        "e2e_ms": parsed.e2e_ms,
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "finish_reason": finish,
        "token_events": len(parsed.stream.token_chunks) if parsed.stream else None,
        "network_reads": len(record.chunks) if stream else None,
        "server_request_id": parsed.server_request_id,
    }
    if parsed.problems:
        return _result(
            check_id,
            Status.FAIL,
            f"{mode} answer is broken: {'; '.join(parsed.problems)}",
            measurements,
        )
    if not (message.get("content") or "").strip():
        return _result(
            check_id,
            Status.FAIL,
            f"{mode} answer has no content (finish_reason {finish})",
            measurements,
        )
    if finish not in ("stop", "length"):
        return _result(
            check_id,
            Status.FAIL,
            f"{mode} answer ended with finish_reason {finish!r}",
            measurements,
        )
    timing = f"first token {parsed.ttft_ms:.0f} ms, " if stream and parsed.ttft_ms else ""
    return _result(
        check_id,
        Status.PASS,
        f"{mode} text answer: {usage.get('completion_tokens')} tokens, {timing}"
        f"total {parsed.e2e_ms:.0f} ms",
        measurements,
    )


def check_metrics(ctx: CheckContext, before: Scrape, after: Scrape, served: int) -> CheckResult:
    """The engine's counters must account for the requests we just sent."""
    evidence = tuple(e for e in (before.evidence, after.evidence) if e)
    if before.snapshot is None or after.snapshot is None:
        problem = before.problem or after.problem
        return _result(
            "smoke.metrics", Status.NO_DATA, f"no engine metrics: {problem}", evidence=evidence
        )
    delta = MetricsDelta(before.snapshot, after.snapshot)
    successes = delta.counter("request_success")
    info = after.snapshot.series("cache_config_info")
    labels = dict(info[0].labels) if info else {}
    measurements: dict[str, float | int | str | bool | None] = {
        "request_success_delta": successes,
        "prompt_tokens_delta": delta.counter("prompt_tokens"),
        "generation_tokens_delta": delta.counter("generation_tokens"),
        "kv_cache_usage_perc": delta.gauge("kv_cache_usage_perc", "max"),
        "num_requests_running": delta.gauge("num_requests_running"),
        "num_requests_waiting": delta.gauge("num_requests_waiting"),
        "enable_prefix_caching": labels.get("enable_prefix_caching"),
        "block_size": labels.get("block_size"),
        "engines": len(
            {dict(s.labels).get("engine") for s in after.snapshot.series("num_requests_running")}
        ),
    }
    ctx.bundle.write_json("metrics/smoke-delta.json", measurements)
    evidence = (*evidence, "metrics/smoke-delta.json")
    if served == 0:
        return _result(
            "smoke.metrics",
            Status.NO_DATA,
            "no request was served before the second scrape, so the counters account for "
            "nothing: the request classes before this check must succeed first",
            measurements,
            evidence,
        )
    if successes is None:
        return _result(
            "smoke.metrics",
            Status.NO_DATA,
            "metrics have no request_success counter",
            measurements,
            evidence,
        )
    if successes < served:
        return _result(
            "smoke.metrics",
            Status.FAIL,
            f"metrics counted {successes:g} finished requests, but {served} were served: "
            "the metrics URL does not describe the engine that answered",
            measurements,
            evidence,
        )
    shared = (
        f"; {successes - served:g} more than ours (a shared server?)" if successes > served else ""
    )
    return _result(
        "smoke.metrics",
        Status.PASS,
        f"engine metrics counted our {served} request(s){shared}",
        measurements,
        evidence,
    )
