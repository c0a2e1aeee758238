"""Issue 20 §3: a window where nothing came back while requests waited is a stall — apart from
slowness (something still flows) and from capacity; /health may well say 200 meanwhile."""

from __future__ import annotations

import pytest

from golive.checks.capacity.rules import Action, StabilityPolicy, StepStats, classify_concurrency
from golive.checks.capacity.stalls import NS, Probe, stall_in
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings

URL = "http://127.0.0.1:8000/v1/chat/completions"


def _req(
    n: int, sent_s: float, chunks_s: list[float], end_s: float, ok: bool = True
) -> RequestRecord:
    stamps = tuple(int(t * NS) for t in chunks_s)
    failure = None if ok else Failure(FailureKind.TIMEOUT, "no data for 3 s (read)")
    return RequestRecord(
        f"r{n}",
        f"c2-{n}",
        "POST",
        URL,
        {},
        True,
        0.0,
        Timings(
            int(sent_s * NS),
            int(sent_s * NS),
            stamps[0] if stamps else None,
            stamps[0] if stamps else None,
            int(end_s * NS),
            stamps,
        ),
        200 if ok else None,
        None,
        (),
        failure,
    )


def _steady(n: int, sent: float, until: float) -> RequestRecord:
    return _req(n, sent, [sent + 0.1 * i for i in range(1, int((until - sent) * 10))], until)


def _probes(start: float, end: float, ok: bool = True) -> list[Probe]:
    return [Probe(int(t * NS), ok) for t in range(int(start), int(end))]


def _frozen() -> list[RequestRecord]:
    """Concurrency 2: tokens until 5 s, then nothing for 25 s — each request timed out after 3 s
    and the closed loop sent the next — then tokens again."""
    records = [_steady(0, 0.0, 5.0), _steady(1, 0.0, 5.0)]
    n, t = 2, 5.0
    while t < 29.0:
        records += [_req(n, t, [], t + 3.0, ok=False), _req(n + 1, t, [], t + 3.0, ok=False)]
        n, t = n + 2, t + 3.0
    records += [_steady(n, 29.5, 31.0), _steady(n + 1, 29.5, 31.0)]
    return records


def test_a_frozen_engine_with_health_200_is_a_stall() -> None:
    """No byte of any answer for longer than the stall limit while /health answers 200 is an engine
    stall, with its figures."""
    found = stall_in(_frozen(), _probes(0, 31), stall_s=20, concurrency=2)
    assert found is not None
    assert found.startswith("engine stalled: no byte of any answer for 24.6 s")
    assert "while /health answered 200 (25 of 25 probes)" in found
    assert "16 given up on meanwhile" in found


def test_health_failing_during_the_stall_is_said() -> None:
    """When /health also failed during the stall, the finding says how often."""
    probes = [*_probes(0, 10), *_probes(10, 31, ok=False)]
    found = stall_in(_frozen(), probes, stall_s=20, concurrency=2)
    assert found is not None
    assert "/health failed 20 of 25 probes during it" in found


@pytest.mark.parametrize(
    ("records", "concurrency"),
    [
        # steady streams: nothing to see
        ([_steady(0, 0.0, 40.0), _steady(1, 0.0, 40.0)], 2),
        # one request waits 25 s (a long prefill, a queue) while the other streams: slowness
        ([_req(0, 0.0, [25.0], 26.0), _steady(1, 0.0, 30.0)], 2),
        # a silence with nothing in flight is idle time, not a stall
        ([_steady(0, 0.0, 2.0), _steady(1, 30.0, 32.0)], 1),
        # shorter than stall_s
        ([_req(0, 0.0, [15.0], 16.0), _req(1, 0.0, [15.0], 16.0)], 2),
    ],
)
def test_not_a_stall(records: list[RequestRecord], concurrency: int) -> None:
    """Slow but progressing answers are not a stall."""
    assert stall_in(records, _probes(0, 40), stall_s=20, concurrency=concurrency) is None


def test_a_single_request_window_stalls_alone() -> None:
    """A window of one request stalls on that request alone."""
    found = stall_in([_req(0, 0.0, [24.0], 25.0)], _probes(0, 25), stall_s=20, concurrency=1)
    assert found is not None
    assert "for 24.0 s" in found


def test_a_stall_is_judged_before_any_capacity_reading() -> None:
    """A stalled step is judged a stall before any capacity reading of it."""
    step = StepStats(2, 10, 16, 31.0, 1.0, 3.0, 0.5, 0.0, 0.0, 2.0, 0.0, stall="engine stalled: x")
    stable = StepStats(1, 40, 0, 20.0, 0.5, 0.6, 0.1, 0.0, 0.0, 1.0, 0.0)
    result = classify_concurrency([stable, step], StabilityPolicy())
    assert result.action is Action.STALLED
    assert result.reason == "engine stalled: x"
