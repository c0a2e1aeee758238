"""What a `--workers` process hands the main process for each answer: enough to judge it by
(timings, status, the reassembled answer, its problems), not the raw bytes the bundle line
already stands for; a failed answer whole, since a finding may quote it."""

from __future__ import annotations

import dataclasses
import pickle

from golive.bundle.store import REDACTED
from golive.checks.capacity.stalls import flight, stall_in
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings, parse
from golive.traffic.worker_wire import for_main, from_worker, to_main

MS = 1_000_000
STREAM = b"".join(
    [b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n']
    + [b'data: {"choices":[{"index":0,"delta":{"content":" word"}}]}\n\n'] * 64
    + [
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
)
BODY = {"stream": True, "messages": [{"role": "system", "content": "policy " * 400}]}


def _record(status: int = 200, failure: Failure | None = None) -> RequestRecord:
    stamps = tuple(range(10 * MS, 80 * MS, MS))
    timings = Timings(0, MS, 5 * MS, 10 * MS, 80 * MS, stamps)
    chunks = tuple(STREAM[i : i + 512] for i in range(0, len(STREAM), 512))
    return RequestRecord(
        "golive-x-1", "c4@worker-0", "POST", "http://127.0.0.1:1/v1/chat/completions",
        BODY, True, 0.0, timings, status, {"content-type": "text/event-stream"}, chunks,
        failure, {"User-Agent": "golive"},
    )  # fmt: skip


def test_an_answer_travels_without_its_raw_bytes_and_judges_the_same() -> None:
    """A quarter of the bytes or less, and every figure the main process reads is the same:
    latency from the intended send, time to first token, problems, the reassembled answer,
    the stall detector's verdict on its chunk timings."""
    parsed = parse(_record())
    slim = for_main(parsed)
    assert slim.record.chunks == ()
    assert slim.record.body is None
    assert len(pickle.dumps(slim)) * 4 < len(pickle.dumps(parsed))
    # what the window's figures, the stall detector and the ledger read is unchanged
    assert slim.record.ok
    assert slim.problems == parsed.problems == ()
    assert slim.e2e_from_intended_ms == parsed.e2e_from_intended_ms == 80.0
    assert slim.ttft_from_intended_ms == parsed.ttft_from_intended_ms
    assert slim.stream == parsed.stream  # the reassembled answer
    assert slim.stream is not None
    assert slim.stream.content == " word" * 64
    assert stall_in([flight(slim.record)], [], 0.01, 1) == stall_in(
        [flight(parsed.record)], [], 0.01, 1
    )


def test_every_field_but_the_raw_bytes_body_and_headers_arrives() -> None:
    """Whatever a record holds besides its raw bytes, request body and headers reaches the
    main process as the worker had it (a field added to the record later included: each is
    set here to a value other than its default; `failure` is None in any answer that
    succeeded)."""
    dropped = {"body", "chunks", "headers", "sent_headers"}
    record = dataclasses.replace(_record(), resent=True, method="PUT", started_at=12.5)
    slim = for_main(parse(record)).record
    assert slim is not record  # it was slimmed: an answer that succeeded
    defaults = RequestRecord("", "", "", "", None, False, 0.0, Timings(0, 0))
    for f in dataclasses.fields(RequestRecord):
        if f.name in dropped:
            continue
        if f.name != "failure":
            assert getattr(record, f.name) != getattr(defaults, f.name), f"set {f.name} here"
        assert getattr(slim, f.name) == getattr(record, f.name), f.name
    assert all(getattr(slim, name) in (None, ()) for name in dropped)


def test_a_failed_answer_travels_whole() -> None:
    """A refusal or a broken connection keeps its body and bytes: a finding quotes them. The
    API key it was sent with does not travel."""
    refused = parse(_record(status=400))
    assert for_main(refused) is refused
    broken = parse(_record(failure=Failure(FailureKind.DISCONNECTED, "connection reset")))
    assert for_main(broken) is broken
    keyed = dataclasses.replace(
        _record(status=401), sent_headers={"Authorization": "Bearer sk-test-1", "Accept": "*/*"}
    )
    sent = for_main(parse(keyed)).record
    assert sent.body == keyed.body
    assert sent.chunks == keyed.chunks
    assert sent.sent_headers == {"Authorization": REDACTED, "Accept": "*/*"}


TOOL_STREAM = (
    b'data: {"id":"chatcmpl-7","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"tool_calls":[{"index":0,"id":"call_1","type":"function","function":'
    b'{"name":"lookup","arguments":"{\\"q\\": "}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
    b'{"arguments":"\\"x\\"}"}}]},"finish_reason":"tool_calls"}],'
    b'"usage":{"prompt_tokens":12,"completion_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)


def test_a_batch_crosses_the_pipe_unchanged() -> None:
    """Every answer of a batch reaches the main process equal to what the worker parsed:
    a streamed answer, a tool call with its usage, a refusal with its JSON error body and
    request, a broken stream with its bytes, a non-streamed JSON answer, each with its
    bundle line. The batch travels as bytes (MessagePack), not pickled."""
    stamps = (2 * MS, 3 * MS)
    tool = dataclasses.replace(
        _record(), chunks=(TOOL_STREAM,), timings=Timings(0, MS, 2 * MS, 2 * MS, 3 * MS, stamps)
    )
    error = b'{"object":"error","message":"max_tokens is too large","code":400}'
    refused = dataclasses.replace(_record(status=400), stream=False, chunks=(error,))
    broken = _record(failure=Failure(FailureKind.DISCONNECTED, "connection reset"))
    plain = dataclasses.replace(
        _record(),
        stream=False,
        chunks=(
            b'{"id":"cmpl-1","choices":[{"message":{"content":"hi"}}],'
            b'"usage":{"prompt_tokens":[1,2.5,null]}}',
        ),
    )
    parsed = [for_main(parse(r)) for r in (_record(), tool, refused, broken, plain)]
    tool_answer = parsed[1].stream
    assert tool_answer is not None
    assert tool_answer.tool_calls[0].arguments == '{"q": "x"}'
    refusal = {"object": "error", "message": "max_tokens is too large", "code": 400}
    assert parsed[2].json_body == refusal
    batch = [(p, f"line {i}\n") for i, p in enumerate(parsed)]
    wire = to_main(batch)
    assert isinstance(wire, bytes)
    assert from_worker(wire) == batch


def test_what_messagepack_cannot_hold_travels_pickled() -> None:
    """Valid JSON that Python reads but MessagePack cannot hold (an integer past 64 bits, an
    escaped lone surrogate) in a server's answer: that batch travels pickled and still
    arrives whole, not as a worker that fails mid-window."""
    for text, value in (
        (b'{"seed":123456789012345678901234567890}', 123456789012345678901234567890),
        (b'{"seed":"\\ud800"}', "\ud800"),
    ):
        odd = dataclasses.replace(_record(), stream=False, chunks=(text,))
        batch = [(for_main(parse(odd)), "line\n")]
        assert batch[0][0].json_body == {"seed": value}
        wire = to_main(batch)
        assert not isinstance(wire, bytes)
        assert from_worker(pickle.loads(pickle.dumps(wire))) == batch
