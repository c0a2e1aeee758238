"""The request classes judge what they claim: an image that reaches the model, a shared
prompt that arrives unchanged — not merely an HTTP 200."""

from __future__ import annotations

import json
from typing import Any

import pytest

from golive.checks.classes_rules import judge_multimodal, judge_shared_prompt
from golive.results import Status
from golive.traffic.records import ParsedResponse, RequestRecord, Timings, parse


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
    result = judge_shared_prompt(prompts, [None] * len(prompts), answers)
    assert result.status is status
