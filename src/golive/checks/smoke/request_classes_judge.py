"""The request classes judged from the bundle alone (issue 18): long context, multimodal,
tools with structured output and the shared system prompt from their saved answers
(`requests/smoke-classes.jsonl`, labelled `<class>@target` and, behind a gateway,
`<class>@engine`), parsed again. The run calls this on the bundle it has just written;
`golive decide` calls it again."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from golive.bundle.layout import SMOKE_PLAN
from golive.bundle.store import BundleReader
from golive.checks.context import transport_problem
from golive.checks.coverage import smoke_coverage
from golive.checks.gateway import asked_prompt, held_to_engine
from golive.checks.smoke.judge import listed_model, saved_models
from golive.checks.smoke.request_classes_rules import (
    CLASS_RESULT,
    answer_text,
    gateway_difference,
    judge_multimodal,
    judge_shared_prompt,
)
from golive.config import GoliveConfig
from golive.results import CheckResult, SkipReason, Status
from golive.traffic.records import ParsedResponse, reparsed
from golive.traffic.workload import STRUCTURED_SCHEMA

FILE = "smoke-classes"
CHECKS = ("smoke.long_context", "smoke.multimodal", "smoke.tools_structured", "smoke.shared_prompt")
VIA = ("@target", "@engine")

Pair = tuple[ParsedResponse | None, ParsedResponse | None]  # through the target, the engine


def judge_classes(
    evidence: BundleReader, config: GoliveConfig, max_model_len: int | None
) -> list[CheckResult]:
    """The four classes in the order they run; `max_model_len` as smoke.models read it."""
    answers = {
        line.label: reparsed(line)
        for line in evidence.records(f"requests/{FILE}.jsonl")
        if line.label.endswith(VIA)
    }

    def pair(label: str) -> Pair:
        return answers.get(f"{label}@target"), answers.get(f"{label}@engine")

    smoke = config.smoke
    repeats = range(smoke.shared_prompt_repeats)
    results = [
        long_context_result(pair("long_context"), max_model_len, smoke.long_context_fraction),
        multimodal_result(smoke.vision, pair("multimodal"), pair("multimodal-text-twin")[0]),
        tools_structured_result(pair("tools"), pair("structured")),
        shared_prompt_result([pair(f"shared_prompt-{n}") for n in repeats]),
    ]
    behind = config.target.engine_url is not None or any(
        label.endswith("@engine") or asked_prompt(answer) for label, answer in answers.items()
    )
    if not behind:  # (a gateway is known from the records too, not from the config alone)
        return results
    labels = {
        "smoke.long_context": ("long_context",),
        "smoke.multimodal": ("multimodal",) if smoke.vision else (),
        "smoke.tools_structured": ("tools", "structured"),
        "smoke.shared_prompt": tuple(f"shared_prompt-{n}" for n in repeats),
    }
    where = f"requests/{FILE}.jsonl"
    return [held_to_engine(r, ((n, pair(n)) for n in labels[r.id]), where) for r in results]


def judge_saved_classes(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """The four classes as `golive decide` judges them: max_model_len as the saved /v1/models
    answer gives it."""
    listed = saved_models(evidence, config.target.model)
    return judge_classes(evidence, config, listed_model(listed.measurements).max_model_len)


def long_context_target(max_model_len: int, fraction: float) -> int:
    """The tokens the long-context request aims at."""
    return int(max_model_len * fraction)


def _answered(
    check_id: str, parsed: ParsedResponse | None, what: str
) -> ParsedResponse | CheckResult:
    """The answer, or the check's result where there is no usable one."""
    if parsed is None:
        return CLASS_RESULT(check_id, Status.NO_DATA, f"{what}: no saved answer in {FILE}")
    problem = transport_problem(parsed, what)
    if problem:
        return CLASS_RESULT(check_id, *problem)
    if parsed.problems:
        return CLASS_RESULT(check_id, Status.FAIL, f"{what}: {'; '.join(parsed.problems)}")
    return parsed


def long_context_result(answer: Pair, max_model_len: int | None, fraction: float) -> CheckResult:
    if max_model_len is None:
        return CLASS_RESULT(
            "smoke.long_context",
            Status.NO_DATA,
            "max_model_len unknown: cannot size a long-context request",
        )
    target = long_context_target(max_model_len, fraction)
    parsed = _answered("smoke.long_context", answer[0], f"~{target}-token request")
    if isinstance(parsed, CheckResult):
        return parsed
    engine = answer[1]
    usage = parsed.usage or {}
    measurements = {
        "prompt_tokens": usage.get("prompt_tokens"),
        "max_model_len": max_model_len,
        "ttft_ms": parsed.ttft_ms,
        "e2e_ms": parsed.e2e_ms,
    }
    if diff := gateway_difference(parsed, engine):
        return CLASS_RESULT(
            "smoke.long_context",
            Status.FAIL,
            f"the gateway altered the answer: {diff}",
            measurements,
        )
    return CLASS_RESULT(
        "smoke.long_context",
        Status.PASS,
        f"{usage.get('prompt_tokens')}-token input served, first token {parsed.ttft_ms:.0f} ms",
        measurements,
    )


def multimodal_result(vision: bool, image: Pair, text_only: ParsedResponse | None) -> CheckResult:
    if not vision:
        return dataclasses.replace(
            CLASS_RESULT(
                "smoke.multimodal",
                Status.SKIPPED,
                "the config says the application sends no images (smoke.vision: false)",
                critical=False,
            ),
            skip_reason=SkipReason.NOT_USED,
        )
    parsed = _answered("smoke.multimodal", image[0], "image request")
    if isinstance(parsed, CheckResult):
        return parsed
    if diff := gateway_difference(parsed, image[1]):
        return CLASS_RESULT(
            "smoke.multimodal", Status.FAIL, f"the gateway altered the answer: {diff}"
        )
    twin = _answered("smoke.multimodal", text_only, "the same request without the image")
    if isinstance(twin, CheckResult):
        return twin
    return judge_multimodal(parsed, twin)


def tools_structured_result(tool_answer: Pair, structured_answer: Pair) -> CheckResult:
    """One forced tool call (arguments valid against the request's own tool schemas) and one
    structured answer (valid against its schema)."""
    tool = _answered("smoke.tools_structured", tool_answer[0], "tool request")
    if isinstance(tool, CheckResult):
        return tool
    structured = _answered("smoke.tools_structured", structured_answer[0], "structured request")
    if isinstance(structured, CheckResult):
        return structured
    tool_engine, structured_engine = tool_answer[1], structured_answer[1]
    problems: list[str] = []
    calls = ((tool.completion or {}).get("choices") or [{}])[0].get("message", {}).get(
        "tool_calls"
    ) or []
    tools = (tool.record.body or {}).get("tools") or []
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
        return CLASS_RESULT(
            "smoke.tools_structured", Status.FAIL, "; ".join(problems), measurements
        )
    return CLASS_RESULT(
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


def shared_prompt_result(repeats: Sequence[Pair]) -> CheckResult:
    """Several requests with one system prompt, judged in the order they were sent."""
    cached: list[int | None] = []
    prompts: list[int | None] = []
    answers: list[str] = []
    for n, (answer, engine) in enumerate(repeats):
        parsed = _answered("smoke.shared_prompt", answer, f"repeat {n}")
        if isinstance(parsed, CheckResult):
            return parsed
        if diff := gateway_difference(parsed, engine):
            return CLASS_RESULT(
                "smoke.shared_prompt", Status.FAIL, f"the gateway altered the answer: {diff}"
            )
        cached.append(parsed.cached_tokens)
        prompts.append((parsed.usage or {}).get("prompt_tokens"))
        answers.append(answer_text(parsed))
    return judge_shared_prompt(prompts, cached, answers)


def judge_smoke_coverage(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """`smoke.coverage` of a smoke section that ran (its plan is here), for a bundle judged on
    completeness: the classes' record stream is the proof they ran."""
    if config.programme is None or evidence.json(SMOKE_PLAN) is None:
        return []
    stream = f"requests/{FILE}.jsonl"
    ran = bool(evidence.records(stream))
    return [smoke_coverage(config.programme, ran, config.smoke.classes, stream)]
