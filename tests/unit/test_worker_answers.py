"""What a `--workers` process hands the main process for each answer: enough to judge it by
(timings, status, the reassembled answer, its problems), not the raw bytes the bundle line
already stands for; a failed answer whole, since a finding may quote it."""

from __future__ import annotations

import pickle

from golive.checks.capacity.stalls import flight, stall_in
from golive.traffic.process_load import for_main
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings, parse

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


def test_a_failed_answer_travels_whole() -> None:
    """A refusal or a broken connection keeps its body and bytes: a finding quotes them."""
    refused = parse(_record(status=400))
    assert for_main(refused) is refused
    broken = parse(_record(failure=Failure(FailureKind.DISCONNECTED, "connection reset")))
    assert for_main(broken) is broken
