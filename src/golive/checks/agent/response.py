"""Response-level rules of the Agent contract: transport and HTTP, the stream's framing, the
official `openai` SDK's types (the client layer) and the retry/idempotency promises.

Pure functions over parsed responses; the runner (`checks/agent/collect.py`) sends and saves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from golive.checks.agent.rules import Expect, Finding, check_message
from golive.metrics import MetricsDelta
from golive.traffic.records import FailureKind, ParsedResponse, error_message
from golive.traffic.sse import DONE, decode_events


@dataclass(frozen=True, slots=True)
class Contract:
    """What one case expects of every answer (from the case and the profile)."""

    expect: Expect
    tools: Mapping[str, Mapping[str, Any]]
    json_schema: Mapping[str, Any] | None
    forbidden_markers: Sequence[str]
    reasoning_fields: Sequence[str]


def message_of(parsed: ParsedResponse) -> tuple[Mapping[str, Any], str | None]:
    """Choice 0's message and finish_reason (empty when there is none)."""
    completion = parsed.completion or {}
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    return (message if isinstance(message, dict) else {}), choice.get("finish_reason")


def response_findings(parsed: ParsedResponse, contract: Contract) -> list[Finding]:
    """Everything wrong with one answer, from the socket up to the schema."""
    record = parsed.record
    if record.status is None:
        kind = record.failure.kind.value if record.failure else "unknown"
        why = record.failure.message if record.failure else "no answer"
        return [Finding(f"transport.{kind}", why)]
    if record.failure is not None and record.failure.kind is not FailureKind.HTTP_STATUS:
        return [Finding(f"transport.{record.failure.kind.value}", record.failure.message)]
    if not record.ok:
        detail = error_message(parsed.json_body) or record.raw_text[:160] or "empty body"
        if contract.expect is Expect.ANSWER_OR_REFUSE and record.refused:
            if error_message(parsed.json_body):
                return []  # refused clearly: a client sees the 4xx and its reason
            return [Finding("http.4xx_unexplained", f"HTTP {record.status} without an error body")]
        return [Finding(f"http.{record.status // 100}xx", f"HTTP {record.status}: {detail}")]
    findings = [Finding("stream.broken", problem) for problem in parsed.problems]
    message, finish = message_of(parsed)
    findings += check_message(
        message,
        finish,
        contract.expect,
        contract.tools,
        contract.json_schema,
        contract.forbidden_markers,
        contract.reasoning_fields,
    )
    return findings


def sdk_finding(parsed: ParsedResponse) -> Finding | None:
    """Would the official `openai` SDK's types accept this answer? (The client layer.)

    The SDK is imported here, not at the top: it costs ~1.2 s of CPU to import, and only
    the Agent section needs it."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    record = parsed.record
    if not record.ok or record.status is None:
        return None  # errors are judged at the HTTP layer
    try:
        if record.stream:
            events, _ = decode_events(record.chunks)
            for event in events:
                if event.data.strip() == DONE or event.event == "error":
                    continue
                payload = json.loads(event.data)
                if isinstance(payload, dict) and "error" not in payload:
                    ChatCompletionChunk.model_validate(payload)
        elif parsed.json_body is not None:
            ChatCompletion.model_validate(parsed.json_body)
    except json.JSONDecodeError:
        return None  # framing problems are the stream layer's finding
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return Finding("sdk.rejects", f"openai SDK types reject {where}: {first['msg']}")
    return None


def complete_calls(parsed: ParsedResponse, tools: Mapping[str, Any]) -> list[str]:
    """Names of the calls a client already holds in full (known function, JSON object
    arguments), even from an answer it gave up on halfway."""
    calls: list[tuple[Any, Any]]
    if parsed.stream is not None:
        calls = [(c.name, c.arguments) for c in parsed.stream.tool_calls]
    else:
        message, _ = message_of(parsed)
        calls = [
            ((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in message.get("tool_calls") or []
        ]
    held = []
    for name, arguments in calls:
        try:
            value = json.loads(arguments) if isinstance(arguments, str) else None
        except json.JSONDecodeError:
            continue
        if name in tools and isinstance(value, dict):
            held.append(str(name))
    return held


def retry_findings(
    first: ParsedResponse, second: ParsedResponse, tools: Mapping[str, Any]
) -> list[Finding]:
    """A client that timed out and retried must not end up holding two calls to execute."""
    gave_up = first.record.failure is not None and first.record.failure.kind in (
        FailureKind.TIMEOUT,
        FailureKind.CANCELLED,
    )
    if not gave_up:
        return []
    held, again = complete_calls(first, tools), complete_calls(second, tools)
    if held and again:
        return [
            Finding(
                "retry.duplicate_call",
                f"the timed-out attempt had already delivered {held}; the retry delivered "
                f"{again} again with new ids: a client without an idempotency key runs both",
            )
        ]
    return []


# reference answers sent one after another before the attempts; the quickest sets the deadline
RETRY_REFERENCES = 2


def reference_labels(case: str, count: int = RETRY_REFERENCES) -> list[str]:
    """The retry case's reference answers' labels (a bundle of before 2026-12-06 holds the
    first only)."""
    first = f"agent-{case}-reference"
    return [first, *(f"{first}-{i}" for i in range(1, count))]


def client_deadline_s(references: Sequence[ParsedResponse], fraction: float) -> float:
    """The retry attempts' client deadline: the first token plus `fraction` of the decode of
    the quickest reference that was answered (200, no failure, a first token: a refusal in
    milliseconds would give the attempts up before their first byte, proving nothing; one
    answer slowed by a passing stall would put the deadline past the whole call). Where none
    was answered, the first reference as it came (10 s where it has no end), as bundles with
    one reference were judged."""
    answered = [
        r
        for r in references
        if r.record.failure is None and r.record.status == 200 and r.ttft_ms and r.e2e_ms
    ]
    candidates = answered or references[:1]
    chosen = min(candidates, key=lambda r: r.e2e_ms or 0.0) if candidates else None
    e2e = ((chosen.e2e_ms if chosen else None) or 10_000.0) / 1000
    ttft = ((chosen.ttft_ms if chosen else None) or 0.0) / 1000
    return ttft + (e2e - ttft) * fraction


def reference_prompt_tokens(references: Sequence[ParsedResponse]) -> int | None:
    """The prompt's length in tokens, as the first reference that reports it counted it
    (every retry-case request sends the same prompt)."""
    for reference in references:
        tokens = (reference.usage or {}).get("prompt_tokens")
        if isinstance(tokens, int) and tokens > 0:
            return tokens
    return None


def engine_admitted(delta: MetricsDelta | None, prompt_tokens: Any) -> int | None:
    """How many requests the engine took in: its prompt-token counter over one request's
    prompt (every attempt sends the same prompt). Given-up requests count too: vLLM drops
    them without a `request_success` entry, but their prompts were read."""
    if delta is None or not isinstance(prompt_tokens, int) or prompt_tokens <= 0:
        return None
    total = delta.counter("prompt_tokens")
    return None if total is None else round(total / prompt_tokens)


def hidden_retries(sent: int, admitted: int | None) -> Finding | None:
    """The engine took in more requests than the client sent: some layer retried by itself."""
    if admitted is None or admitted <= sent:
        return None
    return Finding(
        "retry.hidden_retries",
        f"the engine took in {admitted} requests for the {sent} the client sent: a layer in "
        "between retries by itself, and each retry can emit the same tool call again",
    )
