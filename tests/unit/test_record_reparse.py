"""A saved record line parsed again (`reparsed`) reads as the live answer did: what
`golive decide` needs to judge answers from the bundle alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from golive.bundle.request_line import decode_line, line_text
from golive.traffic.records import (
    Failure,
    FailureKind,
    RequestRecord,
    Timings,
    parse,
    reparsed,
)

MS = 1_000_000


def _sse(*events: dict[str, Any] | str) -> bytes:
    return b"".join(
        f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events
    )


def _delta(content: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


STREAM = _sse(_delta("Hel"), _delta("lo", "stop"), "[DONE]")
PLAIN = json.dumps(
    {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()


def _record(
    stream: bool,
    chunks: tuple[bytes, ...],
    status: int | None = 200,
    failure: Failure | None = None,
    headers: dict[str, str] | None = None,
    resent: bool = False,
) -> RequestRecord:
    stamps = tuple(7 * MS + i * 3 * MS for i in range(len(chunks)))
    return RequestRecord(
        "r1",
        "agent-x-stream-0",
        "POST",
        "http://127.0.0.1:8000/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream},
        stream,
        1_700_000_000.5,
        Timings(
            100 * MS - 250_000,
            100 * MS,
            105 * MS,
            106 * MS,
            100 * MS + 20 * MS if status else None,
            tuple(100 * MS + s for s in stamps),
        ),
        status,
        headers,
        chunks,
        failure,
        resent=resent,
    )


@pytest.mark.parametrize(
    "record",
    [
        _record(True, (STREAM[:40], STREAM[40:90], STREAM[90:])),
        _record(False, (PLAIN,), headers={"x-request-id": "gateway-7"}),
        _record(False, (b'{"error": {"message": "bad field", "param": "tools"}}',), status=400),
        _record(True, (_sse(_delta("par")),)),  # a stream cut before [DONE]
        _record(False, (b"<html>oops</html>",), status=502),
        _record(True, (), status=None, failure=Failure(FailureKind.TIMEOUT, "deadline 3 s")),
        _record(False, (PLAIN,), resent=True),  # sent again on a fresh connection
    ],
    ids=["stream", "plain", "refused", "cut-stream", "not-json", "timeout", "resent"],
)
def test_a_saved_line_reads_back_as_the_live_answer(record: RequestRecord) -> None:
    """A saved record line parses back to exactly the live answer: body, stream, failure, timings
    and ids."""
    live = parse(record)
    again = reparsed(decode_line(line_text(live.saved_line()), "requests/x.jsonl line 1"))
    assert again.completion == live.completion
    assert again.json_body == live.json_body
    assert again.problems == live.problems
    assert again.server_request_id == live.server_request_id
    assert again.record.status == live.record.status
    assert again.record.failure == live.record.failure
    assert again.record.ok is live.record.ok
    assert again.ttft_ms == live.ttft_ms
    assert again.e2e_ms == live.e2e_ms
    assert again.record.resent is live.record.resent
    assert again.saved_line() == live.saved_line()


def test_a_sampled_out_line_cannot_be_judged_again() -> None:
    """A line saved without its body refuses to be judged again."""
    line = parse(_record(False, (PLAIN,))).saved_line(full=False)
    with pytest.raises(ValueError, match="saved without its body"):
        reparsed(line)


def test_json_nested_past_the_readers_depth_is_a_problem_not_a_crash() -> None:
    """A 200 answer whose JSON body is nested deeper than Python's reader goes (valid JSON, a
    hostile or broken server) is parsed with a named problem, as a body that is not JSON is:
    parsing never raises."""
    body = ("[" * 5000 + "]" * 5000).encode()
    record = RequestRecord(
        "r-1", "smoke", "POST", "http://127.0.0.1:1/v1/chat/completions", {}, False, 0.0,
        Timings(0, MS, 2 * MS, 2 * MS, 3 * MS), 200, None, (body,),
    )  # fmt: skip
    parsed = parse(record)
    assert parsed.json_body is None
    assert parsed.problems[0].startswith("body is JSON nested too deeply to read")
