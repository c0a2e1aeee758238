"""Latency from the intended send time (issue 19 §6): a request a rate schedule meant to send
at t but the client sent 40 ms later was not answered 40 ms faster than it seemed."""

from __future__ import annotations

import pytest

from golive.bundle.request_line import decode_line, line_text
from golive.traffic.records import RequestRecord, Timings, parse
from tests.helpers.record_lines import record_line

MS = 1_000_000
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def _record(scheduled_ms: int, sent_ms: int) -> RequestRecord:
    timings = Timings(
        scheduled_ns=scheduled_ms * MS,
        sent_ns=sent_ms * MS,
        headers_ns=(sent_ms + 5) * MS,
        first_byte_ns=(sent_ms + 20) * MS,
        end_ns=(sent_ms + 100) * MS,
        chunk_ns=((sent_ms + 20) * MS, (sent_ms + 30) * MS, (sent_ms + 100) * MS),
    )
    chunks = (STREAM[:75], STREAM[75:134], STREAM[134:])
    return RequestRecord(
        "golive-x-1", "rate", "POST", "http://127.0.0.1:1/v1/chat/completions",
        {"stream": True}, True, 0.0, timings, 200, None, chunks,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("scheduled_ms", "sent_ms", "e2e", "e2e_intended"),
    [
        (1000, 1000, 100.0, 100.0),  # on time (a closed loop's slot: the same moment)
        (1000, 1040, 100.0, 140.0),  # sent 40 ms late: 40 ms more from the intended time
    ],
)
def test_latency_is_measured_from_both_moments(
    scheduled_ms: int, sent_ms: int, e2e: float, e2e_intended: float
) -> None:
    """The answer carries both latencies; the late one counts its wait."""
    parsed = parse(_record(scheduled_ms, sent_ms))
    assert parsed.e2e_ms == pytest.approx(e2e)
    assert parsed.e2e_from_intended_ms == pytest.approx(e2e_intended)
    assert parsed.ttft_from_intended_ms is not None
    assert parsed.ttft_ms is not None
    assert parsed.ttft_from_intended_ms - parsed.ttft_ms == pytest.approx(sent_ms - scheduled_ms)


def test_the_bundle_line_holds_both_latencies() -> None:
    """A saved record shows the reader the lag and both end-to-end figures."""
    timings = parse(_record(1000, 1040)).saved_line(full=False).timings_ms
    assert timings.schedule_lag == pytest.approx(40.0)
    assert timings.end == pytest.approx(100.0)
    assert timings.end_from_intended == pytest.approx(140.0)
    assert timings.first_token is not None
    assert timings.first_token_from_intended == pytest.approx(timings.first_token + 40)


def test_the_drift_reads_the_intended_latency_and_older_bundles_still_read() -> None:
    """The sustained drift judge reads each saved line's latency from the intended time; a
    line from a bundle written before that figure existed reads from the send."""
    line = decode_line(line_text(parse(_record(1000, 1040)).saved_line(full=False)), "line")
    assert line.e2e_s == pytest.approx(0.140)
    older = record_line(timings_ms={"end": 100.0})
    assert older.e2e_s == pytest.approx(0.100)
