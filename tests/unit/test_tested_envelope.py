"""Every verdict states the envelope it tested (verdict.json `tested`, the report, the sign-off
sheet), go-live included, and `golive decide` re-derives it with the limits from the
evidence: an edited envelope is caught like an edited outcome.

Checklist: "State the exact envelope that was tested" / DESIGN.md `tested`: "the envelope the
run exercised: max_concurrency, max_context, sustained_s; going beyond it is a limit".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from golive.bundle.store import Bundle
from golive.orchestration.rederive import rederive
from golive.orchestration.signoff import build_signoff, render_signoff
from golive.report.html import render_html
from golive.report.markdown import render_markdown
from golive.results import CheckClass, CheckResult, Status
from golive.verdict.document import ExercisedEnvelope, VerdictDocument

GOLDEN = Path(__file__).parents[1] / "data/golden-demo"


def _check(check_id: str, status: Status, **measurements: object) -> CheckResult:
    return CheckResult(check_id, CheckClass.CAPACITY, True, status, "s", dict(measurements))  # type: ignore[arg-type]


RAMP_8 = _check("capacity.concurrency", Status.PASS, ceiling=8, steps=4)
LONG_1024 = _check(
    "capacity.long_input", Status.PASS, max_context=1024, step_512="accepted", step_1024="accepted"
)
HELD_300 = _check("capacity.sustained", Status.PASS, duration_s=300.0, concurrency=8)


@pytest.mark.parametrize(
    ("checks", "expected"),
    [
        (
            [RAMP_8, LONG_1024, HELD_300],
            ExercisedEnvelope(max_concurrency=8, max_context=1024, sustained_s=300),
        ),
        # a ramp that found a limit still tested up to its stable step
        (
            [_check("capacity.concurrency", Status.FAIL, ceiling=4, classification="limit")],
            ExercisedEnvelope(max_concurrency=4),
        ),
        # nothing measured: not tested, never 0 or a default
        ([_check("capacity.concurrency", Status.NO_DATA, ceiling=None)], ExercisedEnvelope()),
        ([_check("capacity.concurrency", Status.ERROR, ceiling=8)], ExercisedEnvelope()),
        ([_check("capacity.concurrency", Status.PASS, ceiling=True)], ExercisedEnvelope()),
        ([_check("capacity.concurrency", Status.PASS, ceiling=0)], ExercisedEnvelope()),
        # asked for 8,192, served up to 2,048: the envelope is what was served
        (
            [
                _check(
                    "capacity.long_input",
                    Status.FAIL,
                    max_context=8192,
                    step_2048="accepted",
                    step_8192="died",
                )
            ],
            ExercisedEnvelope(max_context=2048),
        ),
        # a sustained window that failed did not hold for its duration
        ([_check("capacity.sustained", Status.FAIL, duration_s=300.0)], ExercisedEnvelope()),
        ([], ExercisedEnvelope()),
    ],
    ids=["all", "limit", "no-data", "error", "bool", "zero", "served", "sustained-failed", "none"],
)
def test_the_envelope_is_what_was_measured_and_held(
    checks: list[CheckResult], expected: ExercisedEnvelope
) -> None:
    """The envelope from the judged checks: measured values only (never a 0 or a default), the longest input served rather than the one asked, a sustained window only where it held."""
    assert ExercisedEnvelope.of(checks) == expected


def test_the_sentence_names_each_bound_and_what_was_not_tested() -> None:
    """The sentence a reviewer reads names each bound and says 'not tested' where nothing was measured."""
    full = ExercisedEnvelope.of([RAMP_8, LONG_1024, HELD_300]).sentence()
    assert "concurrency up to 8" in full
    assert "context up to 1,024 tokens" in full
    assert "held for 300 s" in full
    assert "outside this verdict" in full
    assert "context not tested" in ExercisedEnvelope.of([RAMP_8]).sentence()


def _golden_with_tested(tmp_path: Path) -> Path:
    """A copy of the real demo bundle, which states its tested envelope."""
    copy = tmp_path / "bundle"
    shutil.copytree(GOLDEN, copy)
    return copy


def test_report_and_signoff_state_the_tested_envelope(tmp_path: Path) -> None:
    """The real demo (ramp stable up to 4, inputs up to 1,024 tokens, 600 s sustained): the
    report and the sign-off sheet say so, and decide agrees with the stated envelope."""
    copy = _golden_with_tested(tmp_path)
    verdict = VerdictDocument.read(copy)
    assert verdict.tested == ExercisedEnvelope(
        max_concurrency=4, max_context=1024, sustained_s=600.0
    )
    assert rederive(copy).problems == ()
    sentence = "concurrency up to 4; context up to 1,024 tokens; sustained load held for 600 s"
    assert sentence in render_markdown(verdict)
    assert sentence in render_signoff(build_signoff(verdict, []))
    assert sentence in render_html(copy, verdict)


@pytest.mark.tampers_bundle
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tested", {"max_concurrency": 64, "max_context": 1024, "sustained_s": 600.0}),
        ("limits", {}),  # the demo's features to disable, deleted
        ("limits", {"max_concurrency": 64, "disable_features": []}),
    ],
    ids=["wider-tested", "limits-deleted", "limits-raised"],
)
def test_an_edited_envelope_is_caught_after_resealing(
    tmp_path: Path, field: str, value: object
) -> None:
    """A reviewer widens the tested envelope or drops the limits in verdict.json and reseals:
    guardrails and the sign-off would read it, so decide refuses it."""
    copy = _golden_with_tested(tmp_path)
    data = json.loads((copy / "verdict.json").read_text())
    data[field] = value
    (copy / "verdict.json").write_text(json.dumps(data, indent=2))
    Bundle(copy).seal()
    edited = rederive(copy)
    assert not edited.agrees
    assert any(f"verdict.json's {field}" in p or "tested envelope" in p for p in edited.problems)


@pytest.mark.tampers_bundle
def test_a_lengthened_sustained_window_is_not_a_longer_envelope(tmp_path: Path) -> None:
    """A reviewer writes window_s 3600 into the demo's sustained row (600 s held) and reseals:
    the seconds held are never longer than the window's records span (about 600 s from the
    first send to the last answer), and the stated envelope no longer agrees: caught."""
    copy = _golden_with_tested(tmp_path)
    row_path = copy / "metrics/capacity-sustained.json"
    row = json.loads(row_path.read_text())
    row["window_s"] = 3600
    row_path.write_text(json.dumps(row))
    Bundle(copy).seal()
    again = rederive(copy)
    sustained = next(c for c in again.checks if c.id == "capacity.sustained")
    held = sustained.measurements["duration_s"]
    assert isinstance(held, float)
    assert held <= 605, sustained.measurements
    assert not again.agrees
    assert any("tested envelope" in p for p in again.problems), again.problems


def test_a_demo_verdict_says_it_is_a_demo() -> None:
    """Issue 29 §2: the recorded demo's report says outright that it is a demo, judging the
    demo target only; a run's report does not."""
    demo = VerdictDocument.read(GOLDEN)
    assert demo.command == "demo"
    assert "> **A demo** (`golive demo`)" in render_markdown(demo)
    run = demo.model_copy(update={"command": "run"})
    assert "A demo" not in render_markdown(run)
