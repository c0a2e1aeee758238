"""The Agent contract's response-level rules, case selection and results, on answers the real
CPU vLLM gave (tests/data/agent) and on made-up breakages."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from golive.checks.agent.cases import shipped_cases
from golive.checks.agent.judge import MODES, with_parity
from golive.checks.agent.response import (
    Contract,
    client_deadline_s,
    complete_calls,
    engine_admitted,
    hidden_retries,
    reference_labels,
    response_findings,
    retry_findings,
    sdk_finding,
)
from golive.checks.agent.results import AgentAnswer, case_result, failure_examples
from golive.checks.agent.rules import Expect, Finding, Layer, check_message
from golive.checks.agent.select import load_user_cases, select
from golive.errors import ConfigError
from golive.metrics import MetricsDelta, parse_metrics
from golive.results import Outcome, Status
from golive.traffic.records import (
    Failure,
    FailureKind,
    ParsedResponse,
    RequestRecord,
    Timings,
    parse,
)
from golive.verdict.decide import decide, limits

DATA = Path(__file__).parent.parent / "data"
QWEN = json.loads((DATA / "agent" / "qwen_plain_answers.json").read_text())
CASES = {c.name: c for c in shipped_cases()}


def _contract(name: str) -> Contract:
    case = CASES[name]
    return Contract(case.expect, case.tool_schemas, case.json_schema, (), ("reasoning",))


def _record(
    body: bytes | dict[str, Any],
    status: int | None = 200,
    stream: bool = False,
    failure: Failure | None = None,
) -> RequestRecord:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return RequestRecord(
        "r1",
        "t",
        "POST",
        "http://127.0.0.1/v1/chat/completions",
        {},
        stream,
        0.0,
        Timings(0, 0, 1, 2, 3, (2,)),
        status,
        {},
        (raw,) if status is not None else (),
        failure,
    )


def _sse(*deltas: dict[str, Any], done: bool = True) -> bytes:
    events = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": d, "finish_reason": d.pop("finish", None)}],
        }
        for d in deltas
    ]
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


# ---- what the real engine answered, read against each case's contract ----


@pytest.mark.parametrize(
    ("case", "signatures"),
    [
        ("structured", []),
        ("nested.required", []),
        ("incomplete_args", []),  # cut at 8 tokens with finish_reason length: noticeable
        ("one_arg.auto", ["tool_calls.empty.call_in_content"]),
        ("tool_result", ["content.call_like"]),  # the call echoed as JSON text after the result
        ("invalid_args", ["content.call_like"]),
    ],
)
def test_real_qwen_answers(case: str, signatures: list[str]) -> None:
    """Real Qwen answers give exactly the findings the contract expects, and fit the openai SDK's
    types."""
    parsed = parse(_record(QWEN[case]["response"]))
    found = [f.signature for f in response_findings(parsed, _contract(case))]
    assert found == signatures
    assert sdk_finding(parsed) is None  # vLLM's bodies fit the openai SDK's types


@pytest.mark.parametrize(
    ("record", "case", "signature"),
    [
        (_record({"error": {"message": "boom"}}, 500), "one_arg.required", "http.5xx"),
        (
            _record(b"", None, failure=Failure(FailureKind.CONNECT, "refused")),
            "no_call",
            "transport.connect",
        ),
        (_record(b"<html>", 404), "invalid_args", "http.4xx_unexplained"),
        (_record(_sse({"content": "hi"}, done=False), stream=True), "no_call", "stream.broken"),
        (
            _record(
                _sse({"role": "assistant"}, {"content": "x"}),
                200,
                True,
                Failure(FailureKind.TIMEOUT, "deadline"),
            ),
            "no_call",
            "transport.timeout",
        ),
    ],
)
def test_transport_and_framing_failures(record: RequestRecord, case: str, signature: str) -> None:
    """Transport and stream-framing failures each give their own signature."""
    assert signature in [f.signature for f in response_findings(parse(record), _contract(case))]


def test_a_clear_refusal_of_invalid_history_is_accepted() -> None:
    """A clear 400 for an invalid tool-call history passes that case, and is a failure on a case
    that needs an answer."""
    refusal = {
        "error": {"message": "arguments are not JSON", "type": "BadRequestError", "code": 400}
    }
    assert response_findings(parse(_record(refusal, 400)), _contract("invalid_args")) == []
    # ...but the same refusal on a case that needs an answer is a failure
    found = response_findings(parse(_record(refusal, 400)), _contract("one_arg.required"))
    assert [f.signature for f in found] == ["http.4xx"]


@pytest.mark.parametrize(
    ("message", "finish", "expect", "signature"),
    [
        (
            {"content": '<tool_call>\n{"name": "get_weather"}'},
            "stop",
            Expect.NO_CALL,
            "content.call_like",
        ),
        (
            {
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Li'},
                    }
                ]
            },
            "tool_calls",
            Expect.INCOMPLETE,
            "arguments.incomplete_unflagged",
        ),
        (
            {"content": "ok", "reasoning": "a", "reasoning_content": "b"},
            "stop",
            Expect.ANY,
            "reasoning.fields_disagree",
        ),
        (
            {"content": "ok", "reasoning_content": "a"},
            "stop",
            Expect.ANY,
            "reasoning.unexpected_field",
        ),
    ],
)
def test_more_broken_promises(
    message: dict[str, Any], finish: str, expect: Expect, signature: str
) -> None:
    """Each kind of broken tool-call promise in a message is found with its signature."""
    tools = CASES["one_arg.required"].tool_schemas
    found = check_message(message, finish, expect, tools, reasoning_fields=("reasoning",))
    assert signature in [f.signature for f in found]


def test_truncated_call_with_length_is_noticeable() -> None:
    """A tool call cut by max_tokens with finish_reason length is an honest truncation, not a
    finding."""
    message = {
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"ci'},
            }
        ]
    }
    tools = CASES["one_arg.required"].tool_schemas
    assert check_message(message, "length", Expect.INCOMPLETE, tools) == []


def test_sdk_rejects_what_a_gateway_helpfully_decoded() -> None:
    """Arguments decoded into an object, or an unknown finish_reason, are what the openai SDK
    rejects."""
    body = QWEN["nested.required"]["response"]
    call = body["choices"][0]["message"]["tool_calls"][0]
    broken = json.loads(json.dumps(body))
    broken["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json.loads(
        call["function"]["arguments"]
    )  # an object, not the JSON string the API promises
    finding = sdk_finding(parse(_record(broken)))
    assert finding is not None
    assert finding.signature == "sdk.rejects"
    assert "arguments" in finding.detail
    chunk = _sse({"role": "assistant", "content": "hi", "finish": "abort"})
    found = sdk_finding(parse(_record(chunk, stream=True)))
    assert found is not None
    assert "finish_reason" in found.detail


def test_retry_duplicate_only_when_the_given_up_attempt_held_a_whole_call() -> None:
    """A retried request is a duplicate only when the attempt given up on already held a whole tool
    call."""
    tools = CASES["retry"].tool_schemas
    whole = {
        "tool_calls": [
            {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
            }
        ]
    }
    part = {
        "tool_calls": [
            {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"ci'},
            }
        ]
    }
    timeout = Failure(FailureKind.TIMEOUT, "client deadline")
    retry = parse(_record(QWEN["nested.required"]["response"]))
    given_up_whole = parse(_record(_sse(whole, done=False), 200, True, timeout))
    given_up_part = parse(_record(_sse(part, done=False), 200, True, timeout))
    assert complete_calls(given_up_whole, tools) == ["get_weather"]
    assert complete_calls(given_up_part, tools) == []
    retry_weather = parse(_record(_sse(whole), stream=True))
    assert [f.signature for f in retry_findings(given_up_whole, retry_weather, tools)] == [
        "retry.duplicate_call"
    ]
    assert retry_findings(given_up_part, retry_weather, tools) == []
    assert retry_findings(parse(_record(_sse(whole), stream=True)), retry, tools) == []


def test_hidden_retries_from_the_engines_prompt_counter() -> None:
    """More prompts admitted by the engine than golive sent shows hidden retries; without counters
    nothing is claimed."""
    before = parse_metrics('vllm:prompt_tokens_total{engine="0",model_name="m"} 100\n')
    after = parse_metrics('vllm:prompt_tokens_total{engine="0",model_name="m"} 1100\n')
    admitted = engine_admitted(MetricsDelta(before, after), 100)
    assert admitted == 10
    assert hidden_retries(9, admitted) is not None
    assert hidden_retries(10, admitted) is None
    assert engine_admitted(None, 100) is None
    assert hidden_retries(9, None) is None


# ---- selection, user schemas ----


def test_user_schema_file_becomes_named_cases(tmp_path: Path) -> None:
    """A user's tool schema file becomes one named case per tool, with its own prompt and
    criticality."""
    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n"
        "  - type: function\n"
        "    function:\n"
        "      name: refund\n"
        "      parameters: {type: object, properties: {order: {type: string}},"
        " required: [order]}\n"
        "    prompt: Refund order 9.\n"
        "    critical: false\n"
    )
    (case,) = load_user_cases(path)
    assert case.name == "schema.refund"
    assert not case.critical
    assert case.feature == "the tool refund"
    assert case.tool_choice == {"type": "function", "function": {"name": "refund"}}
    assert case.messages[-1]["content"] == "Refund order 9."


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("tools: []", "tools"),
        ("tools:\n  - function: {name: a}\n", "tools.0.function.parameters"),
        (
            "tools:\n  - function: {name: a, parameters: {type: objekt}}\n",
            "not a valid JSON Schema",
        ),
        ("- 1\n", "(top level)"),
    ],
)
def test_bad_schema_files_name_the_file_and_field(tmp_path: Path, text: str, needle: str) -> None:
    """A bad tool schema file is refused naming the file and the field."""
    path = tmp_path / "tools.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_user_cases(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_select_applies_criticality_and_rejects_unknown_names() -> None:
    """Case selection applies the configured criticality and refuses an unknown case name."""
    chosen = select(shipped_cases(), ["one_arg.auto", "retry"], ["one_arg.auto"], ["retry"])
    assert [(c.name, c.critical) for c in chosen] == [("one_arg.auto", True), ("retry", False)]
    assert chosen[1].feature == "retry"
    with pytest.raises(ConfigError, match=r"agent\.cases: unknown case"):
        select(shipped_cases(), ["one_arg.nope"], (), ())


# ---- results and the decision ----


def _run(
    mode: str,
    i: int,
    *signatures: str,
    layer: Layer = Layer.NONE,
    message: dict[str, Any] | None = None,
) -> AgentAnswer:
    findings = tuple(Finding(s, s) for s in signatures)
    return AgentAnswer(
        mode,
        i,
        findings,
        None,
        None,
        layer if findings else Layer.NONE,
        f"r{i}",
        message or {},
        200,
    )


@pytest.mark.parametrize(
    ("case", "failures", "status", "outcome"),
    [
        ("one_arg.required", 0, Status.PASS, Outcome.SECTION_PASSED),
        # one failure in ten on a critical case is a warn: watched with an owner, not a pass
        ("one_arg.required", 1, Status.WARN, Outcome.OBSERVE_WITH_LIMITS),
        ("one_arg.required", 2, Status.FAIL, Outcome.HOLD),
        # a non-critical case failing in 2 of 10 runs: a known, bounded defect (the feature is
        # limited); in 4 of 10, more than agent.max_bounded_failure_share (20%): not bounded
        ("one_arg.auto", 2, Status.WARN, Outcome.OBSERVE_WITH_LIMITS),
        ("one_arg.auto", 4, Status.FAIL, Outcome.HOLD),
    ],
)
def test_case_result_and_decision(
    case: str, failures: int, status: Status, outcome: Outcome
) -> None:
    """A case's failure count maps to pass, warn or fail and to the outcome the checklist gives for
    it."""
    runs = [
        _run(
            "plain", i, *(["tool_calls.empty"] if i < failures else []), layer=Layer.MODEL_OR_PARSER
        )
        for i in range(10)
    ]
    result = case_result(CASES[case], runs, 2)
    assert result.status is status
    assert result.measurements["passed"] == 10 - failures
    decision = decide([result], ("agent",))
    assert decision.outcome is outcome
    if status is Status.WARN and not result.critical:
        assert limits([result]).to_json()["disable_features"] == [CASES[case].feature]
        assert "tool_choice=auto" in result.summary
    if failures:
        examples = failure_examples(CASES[case], runs)
        assert len(examples) == min(failures, 3)
        assert examples[0]["layer"] == Layer.MODEL_OR_PARSER.value
    if outcome is Outcome.HOLD:
        assert result.critical
        assert decision.rules_fired[0].reason.startswith("repeated protocol or parser failure")
    if case == "one_arg.auto" and outcome is Outcome.HOLD:
        assert "failing in 40% of its runs, more than the 20%" in result.summary


def test_retry_case_that_never_timed_out_proves_nothing() -> None:
    """A retry case whose client deadline never fired proves nothing: no_data and hold."""
    facts = {
        "attempts_sent": 5,
        "timeouts_exercised": 0,
        "client_deadline_s": 3.0,
        "engine_admitted": 5,
        "engine_finished": 5.0,
    }
    result = case_result(CASES["retry"], [_run("plain", 0)], 2, facts)
    assert result.status is Status.NO_DATA
    assert decide([result], ("agent",)).outcome is Outcome.HOLD


def test_hidden_retries_fail_even_when_no_deadline_fired() -> None:
    """The engine took in 10 requests for the 5 the client sent (a hedging gateway) while no
    attempt hit the client's deadline (a slow reference answer gave a long one, as a CI run
    once did): the hidden retries are shown by the engine's counters — a failure, not a
    retry path left unproven."""
    facts = {
        "attempts_sent": 5,
        "timeouts_exercised": 0,
        "client_deadline_s": 8.5,
        "engine_admitted": 10,
        "engine_finished": 10.0,
    }
    hidden = [_run(m, 0, "retry.hidden_retries", layer=Layer.IDEMPOTENCY) for m in MODES]
    result = case_result(CASES["retry"], hidden, 2, facts)
    assert result.status is Status.FAIL
    assert result.measurements["layer"] == Layer.IDEMPOTENCY.value


def test_retry_without_the_engine_counters_is_no_data() -> None:
    """The client saw no duplicate, but only the engine's counters can show a hidden one."""
    facts = {
        "attempts_sent": 5,
        "timeouts_exercised": 2,
        "client_deadline_s": 3.0,
        "engine_admitted": None,
    }
    result = case_result(CASES["retry"], [_run("plain", 0)], 2, facts)
    assert result.status is Status.NO_DATA
    assert "could not be read" in result.summary
    facts["engine_admitted"] = 5
    counted = case_result(CASES["retry"], [_run("plain", 0)], 2, facts)
    assert counted.status is Status.PASS


def test_parity_mismatch_follows_the_twin_that_a_gateway_broke() -> None:
    """A stream/plain mismatch is blamed on the twin whose answer a gateway changed."""
    call = {
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
            }
        ]
    }
    rewritten = {
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"f": 7}'},
            }
        ]
    }
    runs = with_parity(
        [
            _run("stream", 0, message=call),
            _run("plain", 0, "arguments.schema", layer=Layer.GATEWAY, message=rewritten),
            _run("stream", 1, message=call),
            _run("plain", 1, message=call),
        ]
    )
    assert [f.signature for f in runs[0].findings] == ["stream.parity"]
    assert runs[0].layer is Layer.GATEWAY
    assert runs[2].findings == ()


@pytest.mark.parametrize(
    ("content", "signature"),
    [
        # what vLLM >= 0.12 gives: the field is ignored and the model writes prose
        ("The sea at night is dark and calm. Waves whisper on the shore.", "structured.not_json"),
        ('{"tide_code": 12}', "structured.schema"),  # JSON, but not the schema's
        ('{"tide_code": 7341}', None),  # what a server that enforces guided_json returns
    ],
)
def test_the_legacy_guided_json_field_is_judged_against_its_schema(
    content: str, signature: str | None
) -> None:
    """A schema sent the pre-0.12 way (`guided_json`) must constrain the answer; a server that
    ignores the field is a non-critical, named finding: clients using it get free text."""
    case = CASES["guided_json"]
    body = case.body("m", False, 64, 0.0)
    assert body["guided_json"]["required"] == ["tide_code"]
    assert "response_format" not in body
    findings = check_message(
        {"role": "assistant", "content": content},
        "stop",
        case.expect,
        case.tool_schemas,
        case.json_schema,
    )
    assert [f.signature for f in findings] == ([signature] if signature else [])
    if signature is None:
        return
    # one repeat of ten failing in both modes: within the bounded share (20%)
    runs = [
        _run(mode, i, *([signature] if i == 0 else []))
        for i in range(10)
        for mode in ("stream", "plain")
    ]
    result = case_result(case, runs, 2)
    assert result.status is Status.WARN
    assert not result.critical
    assert "this server ignores guided_*" in result.summary
    assert limits([result]).to_json()["disable_features"] == [case.feature]


def test_one_failure_is_never_an_unbounded_defect() -> None:
    """At `--repeat 1` (two runs) one failure of a non-critical case is half its runs, but a
    single failure is not repeated: a bounded defect (warn), as one failure of a critical case
    is a warn; two failures of two are not bounded (fail)."""
    once = [_run("stream", 0, "tool_calls.empty"), _run("plain", 0)]
    assert case_result(CASES["one_arg.auto"], once, 2).status is Status.WARN
    twice = [_run("stream", 0, "tool_calls.empty"), _run("plain", 0, "tool_calls.empty")]
    assert case_result(CASES["one_arg.auto"], twice, 2).status is Status.FAIL


def _timed(ttft_ms: float | None, e2e_ms: float, status: int = 200) -> ParsedResponse:
    """An answer whose first token and end came `ttft_ms` and `e2e_ms` after it was sent; a
    status other than 200 is a refusal (no first token)."""
    refused = Failure(FailureKind.HTTP_STATUS, "refused") if status != 200 else None
    record = dataclasses.replace(
        _record({"choices": []}, status, failure=refused),
        timings=Timings(0, 0, 1, 1, int(e2e_ms * 1e6)),
    )
    first = None if ttft_ms is None else int(ttft_ms * 1e6)
    return dataclasses.replace(parse(record), first_token_ns=first)


@pytest.mark.parametrize(
    ("references", "deadline_s"),
    [
        # one answer, as bundles before two references were sent: first token + half its decode
        ([(700, 2200)], 0.7 + 0.75),
        # the quicker of two sets it: the slower one (a passing stall: 1.9 s to its first
        # token) would put the deadline at 4.0 s, past a whole call the attempts then hold
        ([(1900, 6100), (700, 2200)], 0.7 + 0.75),
        ([(700, 2200), (1900, 6100)], 0.7 + 0.75),
        # a refusal in 4 ms is no answer to time: the deadline would give every attempt up
        # before its first byte, proving nothing
        ([(None, 4, 429), (700, 2200)], 0.7 + 0.75),
        # nothing answered: the first reference as it came, as one-reference bundles were judged
        ([(None, 4, 429), (None, 6, 503)], 0.002),
        ([], 5.0),  # no reference at all: 10 s
    ],
)
def test_the_retry_deadline_is_set_by_the_quickest_reference(
    references: list[tuple[Any, ...]], deadline_s: float
) -> None:
    """The client deadline the retry attempts are given up at is the first token plus half the
    decode of the quickest answered reference, so one reference slowed by a stall cannot put
    it after the call is complete, and a quick refusal cannot put it before the first byte."""
    answers = [_timed(*reference) for reference in references]
    assert client_deadline_s(answers, 0.5) == pytest.approx(deadline_s)
    assert reference_labels("retry") == ["agent-retry-reference", "agent-retry-reference-1"]
