"""The gateway held to the engine by what the engine counted (issue 27 §4): the same request
sent through the gateway and straight to the engine must cost the engine the same prompt
tokens. A gateway that adds a system prompt, or drops turns or tool results, answers
well-formed text and calls; only the count shows it. Blamed on the gateway, so an Agent case
fails on the gateway layer while the engine's own answer is clean."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from golive.checks.agent.cases import shipped_cases
from golive.checks.agent.judge import contract_of, run_of
from golive.checks.agent.rules import Layer
from golive.checks.engine_name import engine_model_for
from golive.checks.gateway import (
    ASK_PROMPT,
    asking_prompt,
    comparison_gap,
    held_to_engine,
    not_held,
    request_rewritten,
)
from golive.checks.smoke.request_classes_rules import gateway_difference
from golive.profiles import load_profile
from golive.results import CheckClass, CheckResult, Status
from golive.traffic.records import ParsedResponse, RequestRecord, Timings, parse


def _answer(
    prompt_tokens: int | None,
    status: int = 200,
    content: str = "It is sunny.",
    ids: list[int] | None = None,
    text: str | None = None,
    request: dict[str, Any] | None = None,
) -> ParsedResponse:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "created": 1,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 4, "total_tokens": 9}
    if ids is not None:
        body["prompt_token_ids"] = ids
    if text is not None:
        body["prompt_text"] = text
    answered = json.dumps(body if status == 200 else {"error": {"message": "x"}})
    return _parsed("agent-tool_result-plain-0", answered, status=status, request=request)


def _parsed(
    label: str, raw: str, stream: bool = False, status: int = 200, request: Any = None
) -> ParsedResponse:
    """One chat answer as the client records it, parsed."""
    record = RequestRecord(
        "r1",
        label,
        "POST",
        "http://127.0.0.1:1/v1/chat/completions",
        request or {},
        stream,
        0.0,
        Timings(0, 1, 2, 3, 4),
        status,
        {"content-type": "text/event-stream" if stream else "application/json"},
        (raw.encode(),),
    )
    return parse(record)


@pytest.mark.parametrize(
    ("via", "direct", "found"),
    [
        (_answer(181), _answer(181), None),
        (_answer(781), _answer(181), "600 added: a system prompt"),
        (_answer(60), _answer(181), "121 missing: earlier turns"),
        # the gateway removed the usage the engine returns: not comparable (comparison_gap)
        (_answer(None), _answer(181), None),
        # nothing to compare: no engine twin, the engine counted nothing, an answer failed
        (_answer(181), None, None),
        (_answer(181), _answer(None), None),
        (_answer(181, 500), _answer(181), None),
    ],
)
def test_the_engine_counts_the_same_prompt_both_ways(
    via: ParsedResponse, direct: ParsedResponse | None, found: str | None
) -> None:
    """The finding names both counts and which way the prompt changed."""
    said = request_rewritten(via, direct)
    if found is None:
        assert said is None
    else:
        assert said is not None
        assert found in said


def test_a_request_class_fails_on_the_rewrite() -> None:
    """smoke's comparison of a class's two answers names the rewrite before the answer's shape."""
    said = gateway_difference(_answer(781), _answer(181))
    assert said is not None
    assert "the gateway rewrote the request" in said


def test_an_agent_case_answered_well_through_a_rewriting_gateway_fails_on_the_gateway() -> None:
    """tool_result answered with text both ways (the contract holds), but the gateway dropped
    the earlier turns: the run fails, blamed on the gateway, the engine's answer clean."""
    case = next(c for c in shipped_cases() if c.name == "tool_result")
    contract = contract_of(case, load_profile("generic"))
    clean = run_of(contract, "plain", 0, _answer(181), _answer(181))
    assert clean.findings == ()
    assert clean.layer is Layer.NONE
    run = run_of(contract, "plain", 0, _answer(60), _answer(181))
    assert run.engine_findings == ()
    assert [f.signature for f in run.findings] == ["gateway.request_rewritten"]
    assert run.layer is Layer.GATEWAY


@pytest.mark.parametrize(
    ("via", "direct", "gap"),
    [
        (_answer(181), _answer(181), None),
        (_answer(781), _answer(181), None),  # compared: a rewrite, not a gap
        (_answer(181), None, "not in the bundle"),
        (_answer(None), _answer(181), "carries no usage"),
        (_answer(181), _answer(None), "counted no prompt tokens"),
        (_answer(181, 500), None, None),  # the gateway's failure is judged as a failure
        (None, None, None),
    ],
)
def test_an_answer_not_held_to_the_engine_is_named(
    via: ParsedResponse | None, direct: ParsedResponse | None, gap: str | None
) -> None:
    """Why an answer through the gateway cannot be held to the engine's: its twin missing,
    or either side counting no prompt tokens (a gateway that drops the stream's usage chunk
    changes no prompt, but shows none either)."""
    said = comparison_gap(via, direct)
    if gap is None:
        assert said is None
    else:
        assert said is not None
        assert gap in said


def test_a_case_or_class_not_held_to_the_engine_is_not_passed() -> None:
    """Behind a gateway, an Agent case or request class whose answers were not all held to
    the engine's is no_data (critical: hold), never a pass; a failure stands as it is."""
    passed = CheckResult("agent.no_call", CheckClass.AGENT, True, Status.PASS, "20/20 passed")
    failed = dataclasses.replace(passed, status=Status.FAIL, summary="3/20 passed")
    gap = [
        "agent-no_call-plain-0: the engine's own answer to the same request is not in the bundle"
    ]
    assert not_held(passed, [], "requests/agent.no_call.engine.jsonl") is passed
    assert not_held(failed, gap, "requests/agent.no_call.engine.jsonl") is failed
    hidden = not_held(passed, gap, "requests/agent.no_call.engine.jsonl")
    assert hidden.status is Status.NO_DATA
    assert "requests/agent.no_call.engine.jsonl" in hidden.summary
    tools = CheckResult("smoke.tools_structured", CheckClass.SMOKE, True, Status.PASS, "ok")
    held = held_to_engine(tools, [("tools", (_answer(181), _answer(181)))], "s")
    # neither answer carries the prompt ids (not asked: a strict gateway): held by count, said
    assert held.status is Status.PASS
    assert "1 answer(s) held to the engine's by prompt-token count only" in held.summary
    stripped = held_to_engine(tools, [("tools", (_answer(None), _answer(181)))], "s")
    assert stripped.status is Status.NO_DATA
    assert "tools: the gateway's answer carries no usage" in stripped.summary


@pytest.mark.parametrize(
    ("asked", "listed", "engine"),
    [
        ("kimi", ["moonshotai/Kimi-K3"], "moonshotai/Kimi-K3"),  # the gateway's alias
        ("m", ["m"], "m"),  # the same name both sides
        ("m", ["a", "m"], "m"),  # listed among others
        ("kimi", ["a", "b"], "kimi"),  # ambiguous: asked as it is (its twins then fail)
        ("kimi", [], "kimi"),  # the engine listed nothing
    ],
)
def test_the_engine_twin_asks_the_engines_own_name(
    asked: str, listed: list[str], engine: str
) -> None:
    """Behind a gateway the engine twin asks the engine's name for the model: the gateway's
    where the engine lists it, else the engine's only model, else the gateway's."""
    assert engine_model_for(asked, listed) == engine


_PROMPT = [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645]
_TEXT = "<|im_start|>system\nYou are a weather agent.<|im_end|>"


def _streamed(ids: list[int] | None, text: str | None = None) -> ParsedResponse:
    """A streamed answer as vLLM sends it with return_token_ids: the prompt on the first
    chunk only."""
    first: dict[str, Any] = {
        "id": "chatcmpl-2",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
    }
    if ids is not None:
        first["prompt_token_ids"] = ids
    if text is not None:
        first["prompt_text"] = text
    chunks = [
        first,
        {"id": "chatcmpl-2", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {
            "id": "chatcmpl-2",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(ids or ()), "completion_tokens": 1},
        },
    ]
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return _parsed("agent-tool_result-stream-0", raw, stream=True)


@pytest.mark.parametrize(
    ("via", "direct", "found"),
    [
        (_answer(10, ids=_PROMPT), _answer(10, ids=_PROMPT), None),
        (_streamed(_PROMPT), _answer(10, ids=_PROMPT), None),
        # a message rewritten keeping its length: the count cannot see it, the ids do
        (
            _answer(10, ids=[*_PROMPT[:5], 9999, *_PROMPT[6:]]),
            _answer(10, ids=_PROMPT),
            "first different at token 5 (as many tokens, other ones: a message rewritten)",
        ),
        (
            _streamed([*_PROMPT[:5], 9999, *_PROMPT[6:]]),
            _streamed(_PROMPT),
            "first different at token 5",
        ),
        # an injected system prompt in front: different from the first token on
        (
            _answer(13, ids=[1, 2, 3, *_PROMPT]),
            _answer(10, ids=_PROMPT),
            "first different at token 0 (3 tokens added",
        ),
        # the last turn dropped: one is the other's start
        (_answer(6, ids=_PROMPT[:6]), _answer(10, ids=_PROMPT), "at token 6 (4 tokens missing"),
        # the counts agree while the ids do not: the ids decide
        (_answer(10, ids=_PROMPT[::-1]), _answer(10, ids=_PROMPT), "a message rewritten"),
    ],
)
def test_the_engine_receives_the_same_prompt_both_ways(
    via: ParsedResponse, direct: ParsedResponse, found: str | None
) -> None:
    """Where both answers carry the prompt the engine rendered (vLLM's return_token_ids),
    the token sequences must be equal, streamed or not: a rewrite that keeps the length is
    named with where the prompts part."""
    said = request_rewritten(via, direct)
    if found is None:
        assert said is None
    else:
        assert said is not None
        assert found in said
        assert "the gateway rewrote the request" in said


def test_the_rendered_prompts_are_shown_where_they_part() -> None:
    """With the rendered text from both sides, the finding shows each prompt where they part,
    so a reader sees what the gateway changed."""
    rewritten = _TEXT.replace("weather agent", "pirate, always")
    said = request_rewritten(
        _answer(10, ids=[*_PROMPT[:6], 7], text=rewritten), _answer(10, ids=_PROMPT, text=_TEXT)
    )
    assert said is not None
    assert "pirate, always" in said
    assert "weather agent" in said


def test_a_gateway_that_drops_the_prompt_ids_is_held_by_count_and_says_so() -> None:
    """The engine gives its prompt ids directly, the gateway's answer carries none: the
    counts are compared (a length change is still caught) and a pass says it was held by
    count only; with no usage either it is not held at all."""
    tools = CheckResult("smoke.tools_structured", CheckClass.SMOKE, True, Status.PASS, "ok")
    by_count = held_to_engine(tools, [("tools", (_answer(10), _answer(10, ids=_PROMPT)))], "s")
    assert by_count.status is Status.PASS
    assert "1 answer(s) held to the engine's by prompt-token count only" in by_count.summary
    assert request_rewritten(_answer(12), _answer(10, ids=_PROMPT)) is not None
    bare = held_to_engine(tools, [("tools", (_answer(None), _answer(10, ids=_PROMPT)))], "s")
    assert bare.status is Status.NO_DATA
    # both sides carry the ids: held by the prompt itself, usage or not
    exact = held_to_engine(
        tools, [("tools", (_answer(None, ids=_PROMPT), _answer(10, ids=_PROMPT)))], "s"
    )
    assert exact is tools


def test_a_request_through_a_gateway_asks_for_the_rendered_prompt() -> None:
    """Both sends of a held pair ask vLLM for the prompt it rendered, nothing else changed."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    asked = asking_prompt(body)
    assert asked == {**body, "return_token_ids": True, "return_prompt_text": True}
    assert ASK_PROMPT.keys() <= asked.keys()
    assert "return_token_ids" not in body


def test_a_twin_that_is_not_the_same_request_or_hides_its_prompt_is_not_held() -> None:
    """A hostile review's cases: the answer saved as the engine's twin was asked another
    request (the gateway's own answer copied in, or another class's), or the engine's answer
    to a request that asked for its prompt carries none (removed after the run, so only the
    counts would be compared): neither holds the gateway to the engine."""
    asked = asking_prompt({"model": "kimi", "messages": [{"role": "user", "content": "hi"}]})
    twin = {**asked, "model": "qwen-gpu"}
    held = _answer(10, ids=_PROMPT, request=asked)
    assert comparison_gap(held, _answer(10, ids=_PROMPT, request=twin)) is None
    other = {**twin, "messages": [{"role": "user", "content": "another"}]}
    gap = comparison_gap(held, _answer(10, ids=_PROMPT, request=other))
    assert gap is not None
    assert "not asked the same request" in gap
    stripped = comparison_gap(_answer(10, request=asked), _answer(10, request=twin))
    assert stripped is not None
    assert "carries no prompt_token_ids though the request asked" in stripped
