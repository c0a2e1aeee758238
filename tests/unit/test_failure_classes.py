"""Every failed request is classified before it counts, from its saved record line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from golive.bundle.request_line import RequestRecordLine, decode_line
from golive.checks.capacity.failures import (
    FailureClass,
    clip,
    failure_class,
    failure_detail,
    request_class,
)
from golive.errors import RecordLineError
from tests.helpers.record_lines import BARE, record_line


def _keys(status: int | None, kind: str | None = None, **extra: Any) -> dict[str, Any]:
    failure = None if kind is None else {"kind": kind, "message": f"{kind} happened"}
    return {"http_status": status, "failure": failure, "problems": [], **extra}


def _line(status: int | None, kind: str | None = None, **extra: Any) -> RequestRecordLine:
    return record_line(**_keys(status, kind, **extra))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (_line(200), None),
        (_line(400, "http_status"), FailureClass.REFUSED),
        (_line(429, "http_status"), FailureClass.RATE_LIMITED),
        (_line(500, "http_status"), FailureClass.SERVER_ERROR),
        (_line(None, "connect"), FailureClass.TRANSPORT),
        (_line(200, "disconnected"), FailureClass.TRANSPORT),  # cut mid-answer
        (_line(None, "cancelled"), FailureClass.CANCELLED),
        (_line(200, problems=["tool call arguments are not JSON"]), FailureClass.BROKEN_ANSWER),
        (_line(None), FailureClass.TRANSPORT),  # no status and no failure: not an answer
    ],
)
def test_each_failed_record_has_one_class(
    line: RequestRecordLine, expected: FailureClass | None
) -> None:
    """Refused, rate-limited, server error, transport, broken answer, cancelled: a failure
    is named before it is counted, and an answered request is none of them."""
    assert failure_class(line) is expected


def test_the_finding_quotes_the_server_and_names_the_request_class() -> None:
    """Every tool-result request answered HTTP 500: the detail quotes the server's words
    for the earliest one and counts the failures by class and by request class, whatever
    the order of the records."""
    tool_result = {"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "tool"}]}
    error = {"error": {"message": "tool parser crashed"}}
    lines = [
        _line(200, request={"messages": [{"role": "user"}]}, started_at=1.0),
        _line(500, "http_status", request=tool_result, response=error, started_at=3),
        _line(500, "http_status", request=tool_result, response=error, started_at=2),
    ]
    detail = failure_detail(lines)
    assert detail.startswith("first: server-error HTTP 500 on a tool-result request: ")
    assert "'tool parser crashed'" in detail
    assert detail.endswith("failed: 2 server-error; on: 2 tool-result")
    assert failure_detail(list(reversed(lines))) == detail
    assert failure_detail(lines[:1]) == ""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messages": [{"role": "user"}], "tools": [{}]}, "tool-call"),
        ({"messages": [{"role": "tool"}], "tools": [{}]}, "tool-result"),
        ({"messages": [{"role": "user"}], "response_format": {}}, "structured-output"),
        ({"messages": [{"role": "user"}]}, "text"),
        ({"sha256": "ab", "messages": 3}, "text"),  # a sampled-out body: counts, not messages
        ("sha256:ab", "request"),
    ],
)
def test_the_request_class_is_read_from_the_body(body: object, expected: str) -> None:
    """The request class comes from the body the record kept; a body that is not one (a
    digest) never breaks the reading."""
    assert request_class(record_line(request=body)) == expected


def test_hostile_record_shapes_never_break_the_reading() -> None:
    """A role that is a list in the body sent: the detail is still written, with the first
    failure in a stable order. A send time beyond a float's range or not a number, problems
    that are no list: the line is refused where it is read, naming the field, and never
    reaches the classes."""
    odd = [
        _line(500, "http_status", request={"messages": [{"role": ["tool"]}]}),
        _line(500, "http_status", request={"messages": "x"}, started_at=2.0),
        _line(500, "http_status", started_at=1.0),
    ]
    detail = failure_detail(odd)
    assert "failed: 3 server-error" in detail
    assert failure_detail(list(reversed(odd))) == detail
    for key, value, field in (
        ("started_at", 10**400, "$.started_at"),
        ("started_at", "now", "$.started_at"),
        ("problems", "x", "$.problems"),
    ):
        text = json.dumps({**BARE, **_keys(500, "http_status"), key: value})
        with pytest.raises(RecordLineError, match=rf"line 7: .* - at `\{field}`"):
            decode_line(text, "requests/capacity-concurrency.jsonl line 7")


def test_a_long_message_is_cut_between_words_never_inside_a_key() -> None:
    """A server echoing the API key in a long error: the quote is cut at a space, so the key
    is either whole (and redacted whole when the bundle is written) or left out."""
    key = "sk-live-" + "Q7x" * 20
    message = "bad request " * 12 + key + " trailing words"
    cut = clip(message, 150)
    assert key not in cut
    assert "sk-live" not in cut
    assert cut.endswith(" …")
    assert clip("short", 150) == "short"
    assert clip(key * 5, 150) == " …"
