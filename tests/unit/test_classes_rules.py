"""The request classes judge what they claim: an image that reaches the model, a shared
prompt that arrives unchanged — not merely an HTTP 200."""

from __future__ import annotations

import json
from typing import Any

import pytest

from golive.bundle.request_line import RequestRecordLine
from golive.checks.smoke.request_classes_rules import (
    judge_multimodal,
    judge_shared_prompt,
    load_result,
)
from golive.results import Status
from golive.traffic.records import ParsedResponse, RequestRecord, Timings, parse
from tests.helpers.record_lines import record_line


def _answer(content: str, prompt_tokens: int | None) -> ParsedResponse:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 3, "total_tokens": 9}
    record = RequestRecord(
        "r1",
        "multimodal",
        "POST",
        "http://127.0.0.1:1/v1/chat/completions",
        {},
        False,
        0.0,
        Timings(0, 1, 2, 3, 4),
        200,
        {"content-type": "application/json"},
        (json.dumps(body).encode(),),
    )
    return parse(record)


@pytest.mark.parametrize(
    ("with_image", "without", "content", "status"),
    [
        (97, 12, "Red.", Status.PASS),
        # 200 OK, but the image never reached the model (a gateway dropped it)
        (12, 12, "I cannot see an image.", Status.FAIL),
        (97, 12, "", Status.FAIL),
        (None, 12, "Red.", Status.NO_DATA),
    ],
)
def test_multimodal_needs_the_image_to_reach_the_model(
    with_image: int | None, without: int, content: str, status: Status
) -> None:
    """The multimodal class passes only when the image's tokens reached the model and the answer
    shows it."""
    result = judge_multimodal(_answer(content, with_image), _answer("?", without))
    assert result.status is status


@pytest.mark.parametrize(
    ("prompts", "answers", "status"),
    [
        ([412, 412, 413], ["ok", "ok", "ok"], Status.PASS),
        # the same system prompt arrived as different prompts: rewritten on the way
        ([412, 448, 413], ["ok", "ok", "ok"], Status.FAIL),
        ([412, 412, 412], ["ok", "", "ok"], Status.FAIL),
        ([412, None, 412], ["ok", "ok", "ok"], Status.NO_DATA),
    ],
)
def test_shared_prompt_must_arrive_unchanged_and_be_answered(
    prompts: list[int | None], answers: list[str], status: Status
) -> None:
    """The shared prompt must arrive with the same token count every time and be answered."""
    result = judge_shared_prompt(prompts, [None] * len(prompts), answers)
    assert result.status is status


def _line(
    status: int | None = 200, end_ms: float | None = 900.0, **extra: object
) -> RequestRecordLine:
    keys: dict[str, object] = {
        "label": "sustained",
        "http_status": status,
        "failure": None,
        "problems": [],
        "timings_ms": {"end": end_ms},
    }
    return record_line(**{**keys, **extra})


@pytest.mark.parametrize(
    ("lines", "status", "summary"),
    [
        ([_line(), _line(end_ms=1400.0)], Status.PASS, "x: 2 requests served, slowest 1.4 s"),
        ([], Status.NO_DATA, "x: no request completed"),
        (
            [
                _line(),
                _line(None, None, failure={"kind": "read_timeout", "message": "no byte in 60 s"}),
            ],
            Status.FAIL,
            "x: 1/2 failed (no byte in 60 s)",
        ),
        # answered 200 but broken: a protocol problem is a failure too
        (
            [_line(problems=["stream ended without [DONE]"])],
            Status.FAIL,
            "x: 1/1 failed (stream ended without [DONE])",
        ),
    ],
)
def test_a_short_load_is_judged_from_its_saved_lines(
    lines: list[RequestRecordLine], status: Status, summary: str
) -> None:
    """The short load's result comes from its saved record lines alone."""
    result = load_result("smoke.sustained", lines, "x")
    assert result.status is status
    assert result.summary == summary
