"""Issue 20 §3: a window where nothing came back while requests waited is a stall — apart from
slowness (something still flows) and from capacity; /health may well say 200 meanwhile."""

from __future__ import annotations

import json
from typing import Any

import pytest

from golive.bundle.request_line import line_text
from golive.checks.capacity.rules import (
    Action,
    StabilityPolicy,
    classify_concurrency,
)
from golive.checks.capacity.stall_evidence import (
    calibrated_stall_s,
    shape_differences,
    stall_differences,
)
from golive.checks.capacity.stalls import (
    Flight,
    Probe,
    flight,
    idle_silence_s,
    saved_flight,
    stall_after_s,
    stall_in,
)
from golive.checks.capacity.step_stats import StepStats
from golive.errors import RecordLineError
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings, parse
from tests.helpers.record_lines import record_line, record_lines

URL = "http://127.0.0.1:8000/v1/chat/completions"
NS = 1_000_000_000


def _record(
    n: int, sent_s: float, chunks_s: list[float], end_s: float, ok: bool = True
) -> RequestRecord:
    """A streamed attempt sent at `sent_s` on the wall clock (its monotonic stamps alike)."""
    stamps = tuple(int(t * NS) for t in chunks_s)
    failure = None if ok else Failure(FailureKind.TIMEOUT, "no data for 3 s (read)")
    return RequestRecord(
        f"r{n}",
        f"c2-{n}",
        "POST",
        URL,
        {},
        True,
        sent_s,
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


def _req(n: int, sent_s: float, chunks_s: list[float], end_s: float, ok: bool = True) -> Flight:
    return flight(_record(n, sent_s, chunks_s, end_s, ok))


def _steady(n: int, sent: float, until: float) -> Flight:
    return _req(n, sent, [sent + 0.1 * i for i in range(1, int((until - sent) * 10))], until)


def _probes(start: float, end: float, ok: bool = True) -> list[Probe]:
    return [Probe(float(t), ok) for t in range(int(start), int(end))]


def _frozen() -> list[Flight]:
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
def test_not_a_stall(records: list[Flight], concurrency: int) -> None:
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


@pytest.mark.parametrize(
    ("records", "idle_s", "threshold_s"),
    [
        # answers at idle: 12.5 s to their first byte (a long prompt's prefill on 2 CPU
        # cores), then a byte every 0.35 s: a silence of 24 s under load is no stall
        ([_req(i, 0.0, [12.5, 12.85, 13.2], 13.5) for i in range(3)], 12.5, 37.5),
        # one answer frozen 30 s at idle among fast ones does not raise the bar
        ([_req(0, 0.0, [30.0], 30.5), _steady(1, 31.0, 33.0), _steady(2, 33.0, 35.0)], 0.1, 20.0),
        # an engine that slow at idle: the bar stops at twice capacity.stall_s
        ([_req(0, 0.0, [19.0, 19.5], 20.0)], 19.0, 40.0),
        # a fast engine's answers: capacity.stall_s stands
        ([_steady(0, 0.0, 2.0)], 0.1, 20.0),
        # a failed request says nothing about how long an answer may be silent
        ([_req(0, 0.0, [], 40.0, ok=False)], 0.0, 20.0),
        ([], 0.0, 20.0),
    ],
)
def test_a_stall_is_longer_than_an_answer_is_silent_at_idle(
    records: list[Flight], idle_s: float, threshold_s: float
) -> None:
    """A prefill sends no byte either: the silence that is a stall is capacity.stall_s, or
    three times how long a typical answer went without a byte at idle if longer, but never
    more than twice capacity.stall_s."""
    silence = idle_silence_s(records)
    assert silence == pytest.approx(idle_s, abs=0.02)
    assert stall_after_s(20.0, silence) == pytest.approx(threshold_s, abs=0.1)


def test_a_slow_prefill_under_load_is_not_a_stall_a_frozen_engine_is() -> None:
    """Concurrency 2 on an engine that took 12.5 s to a first byte at idle: 24 s before the
    first byte of two long prompts is slowness; the frozen window above is still a stall,
    and so is a 45 s silence on that slow engine."""
    slow = [_req(0, 0.0, [24.0, 24.3], 24.6), _req(1, 0.0, [24.5, 24.8], 25.0)]
    threshold = stall_after_s(20.0, 12.5)
    assert stall_in(slow, _probes(0, 25), 20.0, 2) is not None  # what CI saw before
    assert stall_in(slow, _probes(0, 25), threshold, 2) is None
    assert stall_in(_frozen(), _probes(0, 31), stall_after_s(20.0, 0.5), 2) is not None
    hung = [_req(0, 0.0, [45.0, 45.3], 45.6), _req(1, 0.0, [45.5, 45.8], 46.0)]
    assert stall_in(hung, _probes(0, 46), threshold, 2) is not None


def _saved(record: RequestRecord, full: bool = False) -> dict[str, Any]:
    """A record's saved line as the JSON object a stream holds (to edit, then read back)."""
    loaded: dict[str, Any] = json.loads(line_text(parse(record).saved_line(full)))
    return loaded


def _frozen_lines() -> list[dict[str, Any]]:
    """The frozen window's attempts as their saved record lines (JSON objects)."""
    lines = []
    n, t = 2, 5.0
    records = [_record(0, 0.0, [0.1 * i for i in range(1, 50)], 5.0)]
    records += [_record(1, 0.0, [0.1 * i for i in range(1, 50)], 5.0)]
    while t < 29.0:
        records += [_record(n, t, [], t + 3.0, ok=False), _record(n + 1, t, [], t + 3.0, ok=False)]
        n, t = n + 2, t + 3.0
    records += [_record(n, 29.5, [29.6, 29.7], 31.0), _record(n + 1, 29.5, [29.6], 31.0)]
    for record in records:
        lines.append(_saved(record))
    return lines


def test_a_saved_line_gives_the_flight_the_live_record_gave() -> None:
    """The run judges each attempt's flight as its saved line will give it back: the same
    floats, so decide finds the same silence to the digit."""
    record = _record(7, 1_733_300_000.25, [1_733_300_001.5, 1_733_300_002.125], 1_733_300_003.0)
    line = _saved(record)
    assert saved_flight(record_line(**line)) == flight(record)
    with pytest.raises(RecordLineError, match=r"at `\$\.started_at`"):
        record_line(**{**line, "started_at": "x"})
    with pytest.raises(RecordLineError, match=r"at `\$\.timings_ms\.chunks\[0\]`"):
        record_line(**{**line, "timings_ms": {"chunks": ["x"]}})


def test_decide_finds_a_stall_the_row_no_longer_names() -> None:
    """A step row edited to drop its stall (the engine hung: hold) is held to its records:
    the silence is found again and named; the row as the run wrote it agrees; a stall
    named where the records show none is a difference too."""
    lines = record_lines(_frozen_lines())
    flights = [saved_flight(line) for line in lines]
    found = stall_in(flights, _probes(0, 31), 20.0, 2)
    assert found is not None
    row = {"concurrency": 2, "stall": found}
    assert stall_differences(row, lines, 20.0, "s (c2)") == []
    [hidden] = stall_differences({**row, "stall": None}, lines, 20.0, "s (c2)")
    assert "no byte of any answer for 24.6 s" in hidden
    calm = lines[:2]
    [invented] = stall_differences(row, calm, 20.0, "s (c2)")
    assert "show none" in invented


def _hidden(lines: list[dict[str, Any]]) -> list[str]:
    """The frozen window's row with its stall dropped, held to `lines` (read back)."""
    row = {"concurrency": 2, "stall": None, "wall_s": 31.5}
    return stall_differences(row, record_lines(lines), 20.0, "w")


def test_records_edited_to_hide_a_stall_are_not_believed() -> None:
    """A stall hidden by editing the records behind it instead of the row: a chunk made
    null (refused where the line is read, naming it), the attempts spread apart in time, or
    piled on top of each other: each is named, never judged as a window without a stall."""
    lines = _frozen_lines()
    assert "no byte of any answer for 24.6 s" in _hidden(lines)[0]
    nulled = json.loads(json.dumps(lines))
    nulled[0]["timings_ms"]["chunks"][-1] = None
    with pytest.raises(RecordLineError, match=r"got `null` - at `\$\.timings_ms\.chunks\[48\]`"):
        _hidden(nulled)
    shuffled = json.loads(json.dumps(lines))
    shuffled[0]["timings_ms"]["chunks"].reverse()
    assert "out of order" in _hidden(shuffled)[0]
    spread = json.loads(json.dumps(lines))
    for number, line in enumerate(spread):
        line["started_at"] += 1000 * number
    assert any("span" in d and "window ran 31.5 s" in d for d in _hidden(spread))
    piled = json.loads(json.dumps(lines))
    for line in piled[2:]:
        line["started_at"] = 0.0
    assert any("in flight at once, above its concurrency 2" in d for d in _hidden(piled))


def test_the_calibration_counts_what_the_run_counted() -> None:
    """The silence a typical answer had at idle is read from every answered calibration
    attempt, as the run read it: an answer the parser flagged (a protocol problem) still
    counts, so an honest bundle is not held to a lower bar by decide."""
    slow = _record(0, 0.0, [12.5, 12.85, 13.2], 13.5)
    line = _saved(slow)
    flagged = record_line(**{**line, "problems": ["stream ended without data: [DONE]"]})
    assert calibrated_stall_s([flagged], 20.0) == stall_after_s(
        20.0, idle_silence_s([flight(slow)])
    )
    assert calibrated_stall_s([flagged], 20.0) == pytest.approx(37.5)


def test_a_byte_slipped_into_a_timed_out_attempt_is_named() -> None:
    """Cheaper edits that keep every time in order: a chunk added to an attempt that timed
    out after 3 s without data, or its end moved without its end from the intended send:
    neither is an attempt the client could have written."""
    lines = _frozen_lines()
    slipped = json.loads(json.dumps(lines))
    target = next(x for x in slipped if x["failure"] is not None)
    target["timings_ms"]["chunks"] = [1500.0]
    target["timings_ms"]["first_byte"] = 1500.0
    assert "timed out after 3 s without data" in _hidden(slipped)[0]
    moved = json.loads(json.dumps(lines))
    target = next(x for x in moved if x["failure"] is not None)
    target["timings_ms"]["end"] = 1000.0
    assert "end from the intended send" in _hidden(moved)[0]
    chunked = json.loads(json.dumps(lines))
    chunked[0]["stream"] = False
    assert "non-streamed answer with streamed chunks" in _hidden(chunked)[0]


def test_a_calibration_stretched_to_raise_the_bar_is_named() -> None:
    """The calibration runs one request at a time: its answers stretched so a typical one
    looks silent for longer (raising the stall bar) overlap each other, and are named."""
    lines = [_saved(_record(n, 2.0 * n, [2.0 * n + 0.5], 2.0 * n + 1.0), True) for n in range(5)]
    assert shape_differences(record_lines(lines), 1, 10.0, "calibrate") == []
    for line in lines:
        line["timings_ms"]["end"] += 5000.0
        line["timings_ms"]["end_from_intended"] += 5000.0
    named = shape_differences(record_lines(lines), 1, 10.0, "calibrate")
    assert (
        "calibrate: its records hold 3 requests in flight at once, above its concurrency 1" in named
    )
    assert "calibrate: its records span 14.0 s, but the window ran 10 s" in named
