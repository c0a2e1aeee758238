"""Why a /v1/models answer names no served model (`context.unserved`): the sentence an Agent
case left unsent carries, so a reader sees the timeout, the HTTP error or the list itself."""

from __future__ import annotations

import json

import pytest

from golive.checks.context import served_of, unserved
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings, parse

WHAT = "GET /v1/models through the gateway"


def _models(
    status: int | None, body: object = None, failure: Failure | None = None
) -> RequestRecord:
    chunks = () if body is None else (json.dumps(body).encode(),)
    if failure is None and status is not None and not 200 <= status < 300:
        failure = Failure(FailureKind.HTTP_STATUS, f"HTTP {status}")
    return RequestRecord(
        "r1",
        "models",
        "GET",
        "http://127.0.0.1:1/v1/models",
        None,
        False,
        0.0,
        Timings(0, 1, 2, 3, 4),
        status,
        {"content-type": "application/json"},
        chunks,
        failure,
    )


def _listing(*names: str) -> dict[str, object]:
    return {"object": "list", "data": [{"id": n, "object": "model"} for n in names]}


STALLED = Failure(FailureKind.TIMEOUT, "no data for 60 s after sending")


@pytest.mark.parametrize(
    ("record", "wanted", "said"),
    [
        (_models(None, failure=STALLED), None, "no answer (no data for 60 s after sending)"),
        (_models(504, {"error": {"message": "upstream timed out"}}), None, "upstream timed out"),
        (_models(200, _listing()), None, "HTTP 200, but no model listed"),
        (_models(200, _listing("qwen")), "kimi", "lists qwen, not target.model 'kimi'"),
    ],
    ids=["stalled", "gateway-504", "empty-list", "another-model"],
)
def test_an_answer_naming_no_model_says_why(
    record: RequestRecord, wanted: str | None, said: str
) -> None:
    """Each answer that gives golive no model to send to says what it was: the timeout that
    ended it, the gateway's own error, an empty list, or a list without the configured model —
    with how it was asked."""
    parsed = parse(record)
    assert served_of(parsed, wanted, "requests/agent-setup.jsonl") is None
    reason = unserved(parsed, wanted, WHAT)
    assert reason.startswith(WHAT), reason
    assert said in reason, reason
