"""`capacity.answers_under_load`: a probe answered correctly at idle and wrongly under load
is caught with its phase, concurrency and both answers; batch variance that keeps the answer
right is information, and a probe the model cannot answer at idle proves nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import ANSWER_PROBES_PLAN
from golive.bundle.store import BundleReader
from golive.checks.capacity.answer_probes import (
    BY_NAME,
    ProbeAnswer,
    classify_answers,
    correct,
    judge_answers,
    probe_lanes,
)
from golive.results import Status
from golive.traffic.records import RequestRecord, Timings, parse


def _a(probe: str, where: str, ok: bool, text: str, answered: bool = True) -> ProbeAnswer:
    return ProbeAnswer(probe, where, answered, ok, text)


IDLE = [
    _a("arithmetic", "idle", True, "42"),
    _a("extraction", "idle", True, "ZX-4471"),
    _a("schema", "idle", False, "not json"),  # wrong at idle: no reference
]


@pytest.mark.parametrize(
    ("under_load", "status", "said"),
    [
        ([_a("arithmetic", "sustained-c8", True, "42")] * 2, Status.PASS, "stayed correct in 2"),
        (
            [_a("arithmetic", "sustained-c8", False, "43")] * 2,
            Status.FAIL,
            "'arithmetic' answered '42' at idle (correct) and '43' under load (sustained-c8), "
            "wrong in 2 of 2",
        ),
        (
            [_a("arithmetic", "sustained-c8", False, "43"), _a("arithmetic", "c8", True, "42")],
            Status.WARN,
            "wrong in 1 of 2 answers under load (fails above 1)",
        ),
        # wrong at idle and under load: the model's limit, not the load's
        (
            [
                *[_a("schema", "sustained-c8", False, "nope")] * 3,
                _a("arithmetic", "c8", True, "42"),
            ],
            Status.PASS,
            "stayed correct in 1 answers under load (1 word for word as at idle); "
            "not run under load: extraction",
        ),
        # a failed request under load is capacity's to judge, never a wrong answer
        (
            [_a("arithmetic", "sustained-c8", False, "", answered=False)],
            Status.NO_DATA,
            "ended before they ran",
        ),
        ([], Status.NO_DATA, "run longer: --duration"),
    ],
)
def test_answers_under_load_against_the_idle_reference(
    under_load: list[ProbeAnswer], status: Status, said: str
) -> None:
    """Answers under load are judged against the same probe's idle answer: once wrong warns, twice
    fails."""
    got, summary, measurements = classify_answers([*IDLE, *under_load])
    assert got is status
    assert said in summary
    assert measurements["correct_at_idle"] == 2


def test_a_window_too_small_to_spare_a_slot_is_not_judged(tmp_path: Path) -> None:
    """Below concurrency 4 the probes take no slot (it would change the load measured, and
    batching hardly changes an answer there): the check is not made, in the run and again."""
    assert [probe_lanes(c) for c in (1, 3, 4, 8, 64)] == [0, 0, 1, 2, 16]
    (tmp_path / "metrics").mkdir()
    (tmp_path / ANSWER_PROBES_PLAN).write_text(json.dumps({"where": "sustained-c2", "lanes": 0}))
    assert judge_answers(BundleReader(tmp_path), critical=True) == []
    (tmp_path / ANSWER_PROBES_PLAN).write_text(json.dumps({"where": "sustained-c8", "lanes": 2}))
    [check] = judge_answers(BundleReader(tmp_path), critical=True)
    assert check.status is Status.NO_DATA  # no answers saved at all: nothing measured


def test_no_correct_idle_answer_proves_nothing() -> None:
    """With no probe right at idle nothing under load can be judged: no_data."""
    wrong = [_a(p, "idle", False, "?") for p in BY_NAME]
    got, summary, _ = classify_answers([*wrong, _a("arithmetic", "sustained-c4", False, "?")])
    assert got is Status.NO_DATA
    assert "no probe was answered correctly at idle" in summary


def _answer(message: dict[str, Any]) -> RequestRecord:
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return RequestRecord(
        "r", "probe-x-idle", "POST", "http://127.0.0.1/v1/chat/completions", {}, False, 0.0,
        Timings(0, 0, 1, 1, 2, ()), 200, None, (json.dumps(body).encode(),),
    )  # fmt: skip


def _call(arguments: str, name: str = "get_weather") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "tool_calls": [{"id": "c", "type": "function", "function": function}],
    }


@pytest.mark.parametrize(
    ("probe", "message", "right"),
    [
        ("arithmetic", {"content": "42"}, True),
        ("arithmetic", {"content": "The answer is 42."}, True),
        ("arithmetic", {"content": "420"}, False),
        ("extraction", {"content": "Order id: ZX-4471"}, True),
        ("extraction", {"content": "ZX-4417"}, False),
        ("schema", {"content": '{"city": "paris ", "temp_c": 21}'}, True),
        ("schema", {"content": '{"city": "Paris", "temp_c": 12}'}, False),
        ("schema", {"content": "Paris, 21"}, False),
        ("tool_call", _call('{"city": "Oslo", "unit": "celsius"}'), True),
        ("tool_call", _call('{"city": "Bergen"}'), False),
        ("tool_call", _call('{"city": "Oslo"', "get_weather"), False),
        ("tool_call", {"content": "get_weather(Oslo)"}, False),
    ],
)
def test_what_a_correct_answer_is(probe: str, message: dict[str, Any], right: bool) -> None:
    """Each probe's rule for a correct answer accepts the right shapes and refuses the wrong ones."""
    assert correct(BY_NAME[probe], parse(_answer(message))) is right
