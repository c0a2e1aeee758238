"""The post-start smoke checks judged from the bundle alone (issue 18): /health, /version,
/v1/models and the two text requests from their saved answers (`requests/smoke.jsonl`), the
engine's counters from the two saved scrapes (`metrics/smoke-before.prom`, `-after.prom`),
with what the collector noted about each scrape (`metrics/smoke-plan.json`). The run calls
this on the bundle it has just written; `golive decide` calls it again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from golive.bundle.layout import SMOKE_DELTA, SMOKE_PLAN, SMOKE_REQUESTS
from golive.bundle.store import BundleReader
from golive.checks.context import served_entry, transport_problem
from golive.checks.engine_name import engine_model
from golive.config import GoliveConfig
from golive.errors import BadResponse
from golive.metrics import MetricsDelta, Snapshot, parse_metrics
from golive.results import CheckClass, CheckResult, ResultsOf, Status, measured_int
from golive.traffic.records import ParsedResponse, reparsed

TEXT_CHECKS = ("smoke.text", "smoke.text_stream")  # also their requests' labels
CHECKS = ("smoke.health", "smoke.version", "smoke.models", *TEXT_CHECKS, "smoke.metrics")
# smoke.models' measurements that size the requests after it (`listed_model`)
MODEL = "model"
MAX_MODEL_LEN = "max_model_len"


SMOKE_RESULT = ResultsOf(CheckClass.SMOKE, (SMOKE_REQUESTS,))


def judge_smoke(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """health, version, models, text, text_stream and metrics, in that order."""
    plan = evidence.json(SMOKE_PLAN)
    if not isinstance(plan, Mapping):
        return []
    answers = {line.label: reparsed(line) for line in evidence.records(SMOKE_REQUESTS)}
    models = models_result(answers.get("models"), config.target.model)
    model = listed_model(models.measurements).model
    texts = [
        text_result(answers.get(check_id), check_id, model is not None) for check_id in TEXT_CHECKS
    ]
    served = sum(1 for r in texts if r.status is Status.PASS)
    scrapes = plan.get("scrapes") or {}
    return [
        health_result(answers.get("health")),
        version_result(answers.get("version")),
        models,
        *texts,
        metrics_result(
            evidence,
            scrapes.get("before") or {},
            scrapes.get("after") or {},
            served,
            engine_model(evidence, model),
        ),
    ]


def _unsaved(check_id: str, what: str) -> CheckResult:
    return SMOKE_RESULT(check_id, Status.NO_DATA, f"no saved answer to {what} in {SMOKE_REQUESTS}")


def health_result(parsed: ParsedResponse | None) -> CheckResult:
    if parsed is None:
        return _unsaved("smoke.health", "/health")
    problem = transport_problem(parsed, "/health")
    if problem:
        return SMOKE_RESULT("smoke.health", *problem)
    return SMOKE_RESULT(
        "smoke.health",
        Status.PASS,
        f"/health answered {parsed.record.status} in {parsed.e2e_ms:.0f} ms",
        {"http_status": parsed.record.status, "latency_ms": parsed.e2e_ms},
    )


def version_result(parsed: ParsedResponse | None) -> CheckResult:
    if parsed is None:
        return _unsaved("smoke.version", "/version")
    problem = transport_problem(parsed, "/version (is this a vLLM server?)")
    if problem:
        return SMOKE_RESULT("smoke.version", *problem)
    body = parsed.json_body
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str):
        return SMOKE_RESULT(
            "smoke.version",
            Status.FAIL,
            f"/version did not return vLLM's {{'version': ...}}: {parsed.record.raw_text[:120]!r}",
        )
    try:
        Version(version)
    except InvalidVersion:
        return SMOKE_RESULT(
            "smoke.version",
            Status.FAIL,
            f"/version says {version[:80]!r}, which is not a package version (vLLM reports e.g. "
            "'0.32.0' or '0.11.1rc2.dev12+gabc'): the server is not vLLM, or hides its build",
            {"vllm_version": version[:80]},
        )
    return SMOKE_RESULT(
        "smoke.version", Status.PASS, f"vLLM reports version {version}", {"vllm_version": version}
    )


def saved_models(evidence: BundleReader, wanted: str | None) -> CheckResult:
    """smoke.models from the saved /v1/models answer alone: what sizes the requests after it
    (the model the text requests go to, the max_model_len the classes are sized by)."""
    line = next((x for x in evidence.records(SMOKE_REQUESTS) if x.label == "models"), None)
    return models_result(None if line is None else reparsed(line), wanted)


def models_result(parsed: ParsedResponse | None, wanted: str | None) -> CheckResult:
    """The served models; the configured model must be among them (or the first is used).
    A pass names it in `measurements.model`."""
    if parsed is None:
        return _unsaved("smoke.models", "/v1/models")
    problem = transport_problem(parsed, "/v1/models")
    if problem:
        return SMOKE_RESULT("smoke.models", *problem)
    entry, served = served_entry(parsed.json_body, wanted)
    if not served:
        return SMOKE_RESULT("smoke.models", Status.FAIL, "/v1/models lists no models")
    if entry is None:
        return SMOKE_RESULT(
            "smoke.models",
            Status.FAIL,
            f"model {wanted!r} is not served here; served: {', '.join(served)} "
            "(fix --model or target.model)",
            {"served": ", ".join(served)},
        )
    model = str(entry["id"])
    max_len = entry.get("max_model_len")
    return SMOKE_RESULT(
        "smoke.models",
        Status.PASS,
        f"serves {model!r} (max_model_len {max_len})",
        {MODEL: model, MAX_MODEL_LEN: max_len if isinstance(max_len, int) else None},
    )


def text_result(parsed: ParsedResponse | None, check_id: str, sent: bool) -> CheckResult:
    stream = check_id == "smoke.text_stream"
    mode = "streamed" if stream else "non-streamed"
    if not sent:
        return SMOKE_RESULT(
            check_id, Status.NO_DATA, f"no {mode} request sent: no served model known"
        )
    if parsed is None:
        return _unsaved(check_id, f"the {mode} text request")
    record = parsed.record
    problem = transport_problem(parsed, f"{mode} text request")
    if problem:
        return SMOKE_RESULT(check_id, *problem)
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
        "network_reads": len(record.timings.chunk_ns) if stream else None,
        "server_request_id": parsed.server_request_id,
    }
    if parsed.problems:
        return SMOKE_RESULT(
            check_id,
            Status.FAIL,
            f"{mode} answer is broken: {'; '.join(parsed.problems)}",
            measurements,
        )
    if not (message.get("content") or "").strip():
        return SMOKE_RESULT(
            check_id,
            Status.FAIL,
            f"{mode} answer has no content (finish_reason {finish})",
            measurements,
        )
    if finish not in ("stop", "length"):
        return SMOKE_RESULT(
            check_id,
            Status.FAIL,
            f"{mode} answer ended with finish_reason {finish!r}",
            measurements,
        )
    timing = f"first token {parsed.ttft_ms:.0f} ms, " if stream and parsed.ttft_ms else ""
    return SMOKE_RESULT(
        check_id,
        Status.PASS,
        f"{mode} text answer: {usage.get('completion_tokens')} tokens, {timing}"
        f"total {parsed.e2e_ms:.0f} ms",
        measurements,
    )


def saved_snapshot(
    evidence: BundleReader, scrape: Mapping[str, Any]
) -> tuple[Snapshot | None, str | None]:
    """A scrape the collector saved, parsed again, or why there is none (the collector's
    word where the scrape never answered, else what parsing the saved text says)."""
    rel = scrape.get("evidence")
    if scrape.get("problem"):
        return None, str(scrape["problem"])
    text = evidence.text(rel) if isinstance(rel, str) else None
    if text is None:
        return None, f"{rel or 'the scrape'} is not in the bundle"
    try:
        snapshot = parse_metrics(text, taken_at=float(scrape.get("taken_at") or 0.0))
    except BadResponse as exc:
        return None, f"{rel}: {exc}"
    if not snapshot.has_vllm_metrics():
        return None, f"{rel} has no vllm: metric families"
    return snapshot, None


def metrics_result(
    evidence: BundleReader,
    before_scrape: Mapping[str, Any],
    after_scrape: Mapping[str, Any],
    served: int,
    model: str | None = None,
) -> CheckResult:
    """The engine's counters must account for the requests we just sent, read from the served
    model's series only (`model_name`): another engine's or model's series count nothing."""
    files = tuple(str(s["evidence"]) for s in (before_scrape, after_scrape) if s.get("evidence"))
    before, before_problem = saved_snapshot(evidence, before_scrape)
    after, after_problem = saved_snapshot(evidence, after_scrape)
    if before is None or after is None:
        problem = before_problem or after_problem
        return SMOKE_RESULT(
            "smoke.metrics", Status.NO_DATA, f"no engine metrics: {problem}", evidence=files
        )
    named = {v for x in after.series("request_success") if (v := x.label("model_name"))}
    if model is not None and named and model not in named:
        return SMOKE_RESULT(
            "smoke.metrics",
            Status.NO_DATA,
            f"the metrics carry no series for the served model {model!r}, only for "
            f"{', '.join(sorted(named))}: the metrics URL describes another engine or model",
            {"models_in_metrics": ", ".join(sorted(named))},
            evidence=files,
        )

    def mine(name: str) -> dict[str, str]:
        """The served model's series of a family that labels its model (all where none does)."""
        labelled = any(x.label("model_name") for x in after.series(name))
        return {"model_name": model} if model is not None and labelled else {}

    delta = MetricsDelta(before, after)
    successes = delta.counter("request_success", **mine("request_success"))
    running = after.series("num_requests_running", **mine("num_requests_running"))
    info = after.series("cache_config_info")
    labels = dict(info[0].labels) if info else {}
    measurements: dict[str, float | int | str | bool | None] = {
        "request_success_delta": successes,
        "prompt_tokens_delta": delta.counter("prompt_tokens", **mine("prompt_tokens")),
        "generation_tokens_delta": delta.counter("generation_tokens", **mine("generation_tokens")),
        "kv_cache_usage_perc": delta.gauge(
            "kv_cache_usage_perc", "max", **mine("kv_cache_usage_perc")
        ),
        "num_requests_running": delta.gauge(
            "num_requests_running", "sum", **mine("num_requests_running")
        ),
        "num_requests_waiting": delta.gauge(
            "num_requests_waiting", "sum", **mine("num_requests_waiting")
        ),
        "enable_prefix_caching": labels.get("enable_prefix_caching"),
        "block_size": labels.get("block_size"),
        "engines": len({dict(x.labels).get("engine") for x in running}),
    }
    files = (*files, SMOKE_DELTA)
    if served == 0:
        return SMOKE_RESULT(
            "smoke.metrics",
            Status.NO_DATA,
            "no request was served before the second scrape, so the counters account for "
            "nothing: the request classes before this check must succeed first",
            measurements,
            evidence=files,
        )
    if successes is None:
        return SMOKE_RESULT(
            "smoke.metrics",
            Status.NO_DATA,
            "metrics have no request_success counter",
            measurements,
            evidence=files,
        )
    if successes < served:
        return SMOKE_RESULT(
            "smoke.metrics",
            Status.FAIL,
            f"metrics counted {successes:g} finished requests, but {served} were served: "
            "the metrics URL does not describe the engine that answered",
            measurements,
            evidence=files,
        )
    shared = (
        f"; {successes - served:g} more than ours (a shared server?)" if successes > served else ""
    )
    return SMOKE_RESULT(
        "smoke.metrics",
        Status.PASS,
        f"engine metrics counted our {served} request(s){shared}",
        measurements,
        evidence=files,
    )


@dataclass(frozen=True, slots=True)
class ListedModel:
    """The model smoke.models accepted from /v1/models (None: none accepted) and the
    max_model_len it listed for it (None: not listed)."""

    model: str | None
    max_model_len: int | None


def listed_model(measurements: Mapping[str, object]) -> ListedModel:
    """smoke.models' model and max_model_len."""
    model = measurements.get(MODEL)
    return ListedModel(
        model if isinstance(model, str) else None, measured_int(measurements.get(MAX_MODEL_LEN))
    )
