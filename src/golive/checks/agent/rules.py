"""Pure rules of the Agent API contract: per-response findings, pass rates with Wilson
intervals, failure signatures, stream/non-stream parity and the layer to blame.

(Part of issue #6; the case runner and `golive agent` build on these.)
"""

from __future__ import annotations

import enum
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema


class Expect(enum.StrEnum):
    CALL = "call"  # a tool call is required (tool_choice required/named, or the case demands it)
    NO_CALL = "no_call"  # the answer must not call a tool
    JSON = "json"  # structured output against a schema
    INCOMPLETE = "incomplete"  # a truncated call must be flagged so a client can notice
    ANSWER_OR_REFUSE = "answer_or_refuse"  # a valid answer, or a clear 4xx refusal
    ANY = "any"


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken promise in one response; `signature` groups like failures together."""

    signature: str
    detail: str


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a pass rate (sound at 0 and n, unlike the normal one)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


CALL_MARKERS = ("<tool_call>", "</tool_call>", "<|tool_call", "<|open|>call", "[TOOL_CALLS]")


def looks_like_call(content: str, tools: Mapping[str, Mapping[str, Any]]) -> bool:
    """Content that carries a tool call the parser did not extract (bare JSON or markers)."""
    if any(marker in content for marker in CALL_MARKERS):
        return True
    return any(f'"{name}"' in content for name in tools) and '"name"' in content


def check_message(
    message: Mapping[str, Any],
    finish_reason: str | None,
    expect: Expect,
    tools: Mapping[str, Mapping[str, Any]],
    json_schema: Mapping[str, Any] | None = None,
    forbidden_markers: Sequence[str] = (),
    reasoning_fields: Sequence[str] = ("reasoning", "reasoning_content"),
) -> list[Finding]:
    """Every promise a client relies on, for one assistant message."""
    if expect is Expect.INCOMPLETE and finish_reason == "length":
        return []  # cut short, and flagged: a client that reads finish_reason can notice
    findings: list[Finding] = []
    listed = message.get("tool_calls") or []
    if not isinstance(listed, list):
        findings.append(
            Finding("tool_calls.malformed", f"tool_calls is a {type(listed).__name__}, not a list")
        )
        listed = []
    calls = [c for c in listed if isinstance(c, dict)]
    if len(calls) != len(listed):
        findings.append(
            Finding("tool_calls.malformed", f"{len(listed) - len(calls)} tool call(s) not objects")
        )
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = str(content)
    call_like = looks_like_call(content, tools)
    if expect is Expect.CALL and not calls:
        findings.append(
            Finding(
                "tool_calls.empty.call_in_content" if call_like else "tool_calls.empty",
                "no tool_calls"
                + (" — the call was written into content instead" if call_like else ""),
            )
        )
    if expect is Expect.NO_CALL and calls:
        findings.append(
            Finding("tool_calls.unexpected", f"{len(calls)} tool call(s) where none was allowed")
        )
    if expect in (Expect.NO_CALL, Expect.ANSWER_OR_REFUSE) and call_like:
        findings.append(
            Finding(
                "content.call_like",
                f"content carries an unparsed tool call: {content[:100]!r}",
            )
        )
    ids = [c.get("id") for c in calls]
    # as JSON text: a server's id may be an object or a list, which a set cannot hold
    if len({json.dumps(i, sort_keys=True, default=str) for i in ids}) != len(ids):
        findings.append(
            Finding("tool_calls.duplicate_ids", f"ids repeat within one response: {ids}")
        )
    for call in calls:
        findings += _check_call(call, tools)
    if expect is Expect.INCOMPLETE and any(f.signature == "arguments.not_json" for f in findings):
        findings.append(
            Finding(
                "arguments.incomplete_unflagged",
                f"arguments are cut short but finish_reason is {finish_reason!r}, not 'length': "
                "a client would execute them",
            )
        )
    if calls and finish_reason not in ("tool_calls", "stop"):
        findings.append(
            Finding(
                "finish_reason.inconsistent", f"tool calls with finish_reason {finish_reason!r}"
            )
        )
    if not calls and finish_reason == "tool_calls":
        findings.append(
            Finding("finish_reason.inconsistent", "finish_reason tool_calls without tool_calls")
        )
    if expect is Expect.JSON:
        findings += _check_json("content", content, json_schema or {})
    findings += _check_reasoning(message, reasoning_fields)
    for field in ("content", "reasoning", "reasoning_content"):
        text = message.get(field) or ""
        for marker in forbidden_markers:
            if marker in text:
                findings.append(Finding(f"{field}.marker_leak", f"{marker!r} leaked into {field}"))
    return findings


def _check_reasoning(message: Mapping[str, Any], allowed: Sequence[str]) -> list[Finding]:
    """The reasoning text sits in a field the client reads, and two copies agree."""
    present = {f: message[f] for f in ("reasoning", "reasoning_content") if message.get(f)}
    findings = [
        Finding(
            "reasoning.unexpected_field",
            f"reasoning arrived in {name!r}; the client contract reads {', '.join(allowed)}",
        )
        for name in present
        if name not in allowed
    ]
    if len(present) == 2 and present["reasoning"] != present["reasoning_content"]:
        findings.append(
            Finding("reasoning.fields_disagree", "reasoning and reasoning_content differ")
        )
    return findings


def _check_call(call: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    function = call.get("function") or {}
    name = function.get("name")
    if not isinstance(name, str) or name not in tools:
        return [
            Finding(
                "tool_calls.unknown_function", f"function {name!r} is not in the request's tools"
            )
        ]
    return _check_json(f"arguments of {name}", function.get("arguments"), tools[name], "arguments")


def _check_json(
    what: str, raw: Any, schema: Mapping[str, Any], prefix: str = "structured"
) -> list[Finding]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return [
            Finding(f"{prefix}.not_json", f"{what} are not JSON ({exc.msg}): {str(raw)[:80]!r}")
        ]
    if prefix == "arguments" and not isinstance(value, dict):
        return [
            Finding(f"{prefix}.not_object", f"{what} are JSON but not an object: {str(raw)[:80]!r}")
        ]
    try:
        jsonschema.validate(value, dict(schema))
    except jsonschema.ValidationError as exc:
        return [Finding(f"{prefix}.schema", f"{what} break the schema: {exc.message}")]
    except jsonschema.SchemaError as exc:
        return [Finding(f"{prefix}.bad_schema", f"the case's own schema is invalid: {exc.message}")]
    return []


def calls_of(message: Mapping[str, Any]) -> list[tuple[str | None, Any]]:
    """(name, parsed arguments) of each call, for comparing two deliveries of one answer."""
    out = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            args = raw
        out.append((function.get("name"), args))
    return out


def parity(streamed: Mapping[str, Any], plain: Mapping[str, Any]) -> Finding | None:
    """Streamed deltas must reassemble into the call the non-streamed API gives: the same
    functions with the same argument keys (values may differ between two samples)."""
    a, b = _structure(calls_of(streamed)), _structure(calls_of(plain))
    if a != b:
        return Finding("stream.parity", f"streamed calls {a} differ from non-streamed {b}")
    return None


def _structure(calls: list[tuple[str | None, Any]]) -> list[tuple[str | None, Any]]:
    return [(name, sorted(args) if isinstance(args, dict) else args) for name, args in calls]


class Layer(enum.StrEnum):
    MODEL_OR_PARSER = "engine: model output or tool/reasoning parser"
    GATEWAY = "gateway"
    CLIENT = "client: SDK or client schema"
    IDEMPOTENCY = "idempotency: retries duplicate tool calls"
    NONE = "none"


def attribute(
    engine: Sequence[Finding] | None,
    gateway: Sequence[Finding] | None,
    sdk_rejects: bool,
    retry_duplicates: bool,
) -> Layer:
    """The checklist's layer rule: raw engine output first, then the gateway, then the client."""
    if retry_duplicates:
        return Layer.IDEMPOTENCY
    if engine:
        return Layer.MODEL_OR_PARSER
    if gateway:
        return Layer.GATEWAY
    if sdk_rejects:
        return Layer.CLIENT
    return Layer.NONE


@dataclass(frozen=True, slots=True)
class CaseSummary:
    case: str
    runs: int
    passed: int
    low: float
    high: float
    signatures: Mapping[str, int]

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0

    def pass_hat(self, k: int) -> float | None:
        """pass^k (tau-bench): the chance that k runs drawn from these all pass,
        C(passed, k) / C(runs, k). An Agent that retries k times in production needs every one
        of them right: 19 of 20 runs passed is pass^8 0.60. None with fewer than k runs."""
        if k < 1 or self.runs < k:
            return None
        return math.comb(self.passed, k) / math.comb(self.runs, k)


def summarise(case: str, outcomes: Sequence[Sequence[Finding]]) -> CaseSummary:
    """Pass rate with its Wilson interval and failures grouped by signature."""
    passed = sum(1 for findings in outcomes if not findings)
    low, high = wilson(passed, len(outcomes))
    signatures = Counter(f.signature for findings in outcomes for f in findings)
    return CaseSummary(case, len(outcomes), passed, low, high, dict(signatures.most_common()))


REASONING_FIELDS = ("reasoning", "reasoning_content")


def reasoning_fields_written(messages: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many answers carried reasoning text in each field."""
    counts = dict.fromkeys(REASONING_FIELDS, 0)
    for message in messages:
        for name in REASONING_FIELDS:
            value = message.get(name)
            if isinstance(value, str) and value.strip():
                counts[name] += 1
    return counts


def classify_reasoning_field(counts: Mapping[str, int], client_field: str) -> tuple[str, str]:
    """(status, summary) of the client's reasoning field against the fields the server wrote:
    a client reading a field the server no longer writes gets None, silently."""
    written = [name for name in REASONING_FIELDS if counts.get(name)]
    if not written:
        return (
            "no_data",
            f"no answer carried reasoning text (is --reasoning-parser set, and is this a "
            f"reasoning model?): the client's field {client_field!r} cannot be confirmed",
        )
    listing = ", ".join(f"{name!r} in {counts[name]} answer(s)" for name in written)
    if client_field in written:
        return (
            "pass",
            f"the server writes reasoning in {listing}; the client reads {client_field!r}",
        )
    return (
        "fail",
        f"the server writes reasoning in {listing}, never in {client_field!r}, which the client "
        f"reads (agent.client_reasoning_field): the client gets None, silently; read "
        f"{written[0]!r} instead",
    )
