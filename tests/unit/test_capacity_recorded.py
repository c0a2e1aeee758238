"""The pressure phases' summaries against their request records (checks/capacity/recorded.py):
a step row, sustained row or ladder step must say what its records say."""

from __future__ import annotations

from typing import Any

import pytest

from golive.bundle.request_line import RequestRecordLine
from golive.checks.capacity.recorded import (
    by_window,
    curve_differences,
    engine_silent,
    ladder_differences,
    repeats_differences,
    scraped_differences,
    steps_differences,
    window_differences,
    window_records,
)
from tests.helpers.record_lines import record_line


def _record(
    label: str, status: int = 200, e2e_ms: float = 1000.0, **extra: Any
) -> RequestRecordLine:
    keys = {
        "label": label,
        "http_status": status,
        "failure": None if status < 400 else {"kind": "http_status", "message": "x"},
        "problems": [],
        "timings_ms": {"end_from_intended": e2e_ms},
    }
    return record_line(**{**keys, **extra})


FOUR = [_record("c2", e2e_ms=1000.0 + 100 * i) for i in range(4)]


@pytest.mark.parametrize(
    ("row", "records", "named"),
    [
        ({"completed": 4, "errors": 0, "refused": 0, "e2e_p95_s": 1.285}, FOUR, []),
        # a row claiming the answers its records do not have
        (
            {"completed": 4, "errors": 0},
            [*FOUR[:2], _record("c2", 500), _record("c2", 500)],
            ["w: completed 4, but its 4 request records say 2", "w: errors 0, but its 4 "],
        ),
        # refusals are counted from the statuses
        ({"completed": 4, "refused": 0}, [*FOUR, _record("c2", 429)], ["w: refused 0"]),
        # a protocol problem is not an answer
        ({"completed": 1}, [_record("c2", problems=["not JSON"]), _record("c2")], []),
        # latency: an edited p95
        ({"e2e_p95_s": 0.5}, FOUR, ["w: e2e_p95_s 0.5, but its request records say 1.2850 s"]),
        ({"e2e_p95_s": 1.2855}, FOUR, []),  # within the saved figures' rounding
    ],
)
def test_a_window_row_must_say_what_its_records_say(
    row: dict[str, Any], records: list[RequestRecordLine], named: list[str]
) -> None:
    """Counts and the p95 recomputed from the records; each difference named."""
    found = window_differences(row, records, "w")
    assert len(found) == len(named), found
    for expected, got in zip(named, found, strict=True):
        assert got.startswith(expected)


def test_every_window_is_grouped_as_its_label_would_find_it() -> None:
    """One pass over the records finds, for each window, exactly the records (and their order)
    a look-up by its label does: every client's, retried attempts with them, probes apart."""
    labels = ["c2", "c2@worker-1", "c4", "c2~retried1", "c4@worker-0~retried2", "calibrate"]
    labels += ["probe-arithmetic-c2", "long-4096", "c2r1", "c2"]
    records = [_record(label, e2e_ms=100.0 + i) for i, label in enumerate(labels)]
    grouped = by_window(records)
    assert sorted(grouped) == sorted(
        {"c2", "c4", "calibrate", "probe-arithmetic-c2", "long-4096", "c2r1"}
    )
    for label in [*grouped, "c8"]:
        assert grouped.get(label, []) == window_records(records, label)
    assert [r.label for r in grouped["c2"]] == ["c2", "c2@worker-1", "c2~retried1", "c2"]


def test_steps_take_their_records_by_label_on_any_client() -> None:
    """Step c2's records include other clients' (`c2@worker-1`), never c4's or probes."""
    records = [*FOUR[:2], *(_record("c2@worker-1") for _ in range(2)), _record("c4")]
    records.append(_record("probe-arithmetic-c2"))
    assert steps_differences([{"concurrency": 2, "completed": 4}], records, "s") == []
    named = steps_differences([{"concurrency": 4, "completed": 2}], records, "s")
    assert named == ["s line 1 (c4): completed 2, but its 1 request records say 1"]


def test_a_ladder_step_is_served_exactly_when_its_record_was() -> None:
    """An accepted step whose record failed, or a rejected one whose record was served, or an
    accepted one without a record, is named."""
    records = [_record("long-128"), _record("long-256", 400), _record("long-512")]
    steps = [
        {"context_tokens": 128, "outcome": "accepted"},
        {"context_tokens": 256, "outcome": "rejected"},
        {"context_tokens": 512, "outcome": "accepted"},
    ]
    assert ladder_differences(steps, records, "l") == []
    forged = [{**s, "outcome": "accepted"} for s in steps] + [
        {"context_tokens": 1024, "outcome": "accepted"}
    ]
    assert ladder_differences(forged, records, "l") == [
        "l step long-256: accepted, but its record was not served",
        "l step long-1024: accepted, but it has no request record",
    ]


def _prom(successes: float, model: str = "m") -> str:
    return (
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{model}"}} '
        f"{successes}\n"
    )


ASKED = [record_line(label="c2", request={"model": "m"})]


@pytest.mark.parametrize(
    ("row", "before", "after", "phrase"),
    [
        ({"completed": 4, "max_running": 2}, _prom(10), _prom(14), None),
        ({"completed": 4, "max_running": 2}, _prom(10), _prom(20), None),  # a shared server
        ({"completed": 0, "max_running": 0}, _prom(10), _prom(10), None),  # nothing answered
        # a frozen exporter: the counter did not count what was answered
        ({"completed": 4, "max_running": 2}, _prom(10), _prom(10), "grew by 0"),
        # a sampled running gauge that read 0 is no proof: short requests between samples
        # (seen on a starved 2-core runner); the counter is what must move
        ({"completed": 2, "max_running": 0}, _prom(10), _prom(12), None),
        # another model's series only
        ({"completed": 4}, _prom(10, "other"), _prom(14, "other"), "no finished-request"),
        # the counter went down: the engine restarted in the window
        ({"completed": 4}, _prom(10), _prom(3), "the engine restarted"),
        # no scrape: the window's engine figures are unmeasured already, nothing to add
        ({"completed": 4}, None, _prom(14), None),
    ],
)
def test_engine_metrics_must_move_with_the_load(
    row: dict[str, Any], before: str | None, after: str | None, phrase: str | None
) -> None:
    """The served model's finished-request counter grows by at least what was answered, never
    goes down; a sampled running gauge is not held to it."""
    found = engine_silent(row, ASKED, before, after, "c2")
    if phrase is None:
        assert found is None
    else:
        assert found is not None
        assert phrase in found, found


@pytest.mark.parametrize(
    ("row", "named"),
    [
        ({"concurrency": 16, "label": "c16r1", "completed": 4, "errors": 0}, []),
        # a repeat moved to another level, or of a level the ramp never ran
        ({"concurrency": 8, "label": "c16r1", "completed": 4}, ["concurrency 8, but its label"]),
        ({"concurrency": 64, "label": "c64r1", "completed": 0}, ["not a repeat of a step"]),
        (
            {"concurrency": 16, "label": "c16", "completed": 4},
            ["concurrency 16, but its label", "completed 4, but its 0 request records"],
        ),
        # a repeat claiming answers its records do not have
        ({"concurrency": 16, "label": "c16r1", "completed": 9}, ["completed 9, but its 4"]),
    ],
)
def test_a_knee_repeat_must_be_a_repeat_of_a_ramp_step(
    row: dict[str, Any], named: list[str]
) -> None:
    """A knee repeat row (`c<N>r<k>`) is held to its own records, and its label must name its
    level and a level the ramp ran: an edited row would move the knee."""
    records = [_record("c16r1") for _ in range(4)]
    found = repeats_differences([row], [{"concurrency": 8}, {"concurrency": 16}], records, "k")
    assert len(found) == len(named), found
    for expected, got in zip(named, found, strict=True):
        assert expected in got


def test_two_repeats_with_one_label_are_refused() -> None:
    """Two rows claiming one repeat window (the same label) are refused: one of them was not measured."""
    row = {"concurrency": 16, "label": "c16r1", "completed": 4, "errors": 0}
    records = [_record("c16r1") for _ in range(4)]
    found = repeats_differences([row, row], [{"concurrency": 16}], records, "k")
    assert any("a second c16r1" in f for f in found), found


CURVE = (
    "t_s,phase,kv_cache_usage_perc,num_requests_running,num_requests_waiting,num_preemptions\n"
    "0.0,concurrency,0.1,1.0,0.0,0.0\n"
    "0.2,concurrency,0.2,2.0,0.0,0.0\n"
    "0.4,concurrency,0.3,2.0,2.0,0.0\n"
    "0.6,concurrency,0.3,2.0,4.0,0.0\n"
    "0.8,concurrency,0.1,,,0.0\n"
)
C4 = {
    "label": "c4",
    "concurrency": 4,
    "curve_rows": [2, 5],
    "max_waiting": 4.0,
    "max_running": 2.0,
    "mean_waiting": 3.0,
    "engine_held": 5.0,
}


@pytest.mark.parametrize(
    ("rows", "curve", "named"),
    [
        ([C4], CURVE, None),
        # the queue an honest row states, lowered after the run: the stable step it never was
        ([{**C4, "mean_waiting": 0.0, "max_waiting": 0.0}], CURVE, "mean_waiting 0.0"),
        ([{**C4, "max_running": 4.0}], CURVE, "max_running 4.0, but its curve rows say 2.0"),
        # the curve cut short after the run
        ([C4], CURVE[: CURVE.index("0.6,")], "holds 3"),
        # one row's span deleted beside rows that keep theirs
        ([C4, {**C4, "label": "c8", "curve_rows": None}], CURVE, "c8): states the engine"),
        ([{**C4, "curve_rows": "2-5"}], CURVE, "not two row numbers"),
        # every row's span deleted (as a bundle sealed before the rule has none): the figures
        # stand on nothing, and a lowered queue cannot hide behind the gap
        ([{**C4, "curve_rows": None, "mean_waiting": 0.0}], CURVE, "c4): states the engine"),
    ],
)
def test_a_windows_gauges_are_read_again_from_its_curve_rows(
    rows: list[dict[str, Any]], curve: str, named: str | None
) -> None:
    """Each window's running and waiting figures come from the memory curve's rows it names,
    read again as the collector read them (issue 27 §2): lowering a waiting queue in a row
    (a limit gone) is named."""
    found = curve_differences(rows, curve, "metrics/capacity-steps.jsonl")
    if named is None:
        assert found == []
    else:
        assert any(named in f for f in found), found


_SCRAPE = (
    "# TYPE vllm:num_preemptions_total counter\n"
    'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0\n'
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="m"} 4.0\n'
)


def test_a_window_whose_preemption_counter_is_gone_is_not_read_as_none() -> None:
    """A hostile review's case: the preemption counter deleted from a window's two scrapes and
    the row's preemptions set to null, so no preemption limit could apply. Every vLLM
    exports the counter: its absence is named, never read as 'no preemptions'."""
    row = {"label": "c4", "preemptions": 0.0}
    assert scraped_differences(row, _SCRAPE, _SCRAPE, "c4") == []
    without = "\n".join(line for line in _SCRAPE.splitlines() if "preemptions" not in line)
    found = scraped_differences({**row, "preemptions": None}, without + "\n", _SCRAPE, "c4")
    assert found
    assert "its before scrape carries no vllm:num_preemptions_total" in found[0]


@pytest.mark.parametrize(
    ("row", "named"),
    [
        # scrapes deleted after the run under a window whose gauges stay: lost evidence
        ({"label": "c2", "max_running": 2.0, "engine_died": False}, "max_running"),
        # the engine died as the window began: a gauge sample landed before the scrape that
        # found it gone (the real CPU vLLM killed at c2 in CI); its gauges stand on their
        # curve rows, but a scraped figure still needs its scrapes
        ({"label": "c2", "max_running": 2.0, "engine_died": True}, None),
        (
            {"label": "c2", "max_running": 2.0, "preemptions": 0.0, "engine_died": True},
            "preemptions",
        ),
    ],
)
def test_a_window_without_scrapes_states_no_scraped_figure(
    row: dict[str, Any], named: str | None
) -> None:
    """A window whose two scrapes are missing states no figure read from them; gauges are read from the curve rows, so a window where the engine died (its before-scrape found it gone after a gauge sample) may keep them."""
    found = scraped_differences(row, None, None, "c2")
    if named is None:
        assert found == []
    else:
        assert len(found) == 1
        assert f"the row states {named}" in found[0]
