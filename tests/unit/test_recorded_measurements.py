"""A check's typed classification and limits are written into verdict.json among its
measurements exactly as golive wrote them before they were typed: same keys, values and order,
so every sealed bundle reads back to the same results and writes back to the same file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.checks.capacity.collect import classified
from golive.checks.capacity.rules import Action
from golive.checks.capacity.rules import Classification as Capacity
from golive.results import (
    CheckClass,
    CheckLimits,
    CheckResult,
    Classification,
    SkipReason,
    Status,
)
from golive.verdict.document import CheckEntry, VerdictDocument
from golive.verdict.recorded import recorded_measurements

DATA = Path(__file__).parents[1] / "data"
VERDICTS = sorted(DATA.rglob("verdict.json"))


@pytest.mark.parametrize("path", VERDICTS, ids=lambda p: str(p.relative_to(DATA)))
def test_every_sealed_verdict_reads_to_typed_fields_and_writes_back_the_same(path: Path) -> None:
    """Each check of each verdict.json under tests/data: read as a result, its classification
    and limits are typed fields, not measurements; written back, its measurements are the
    file's, key for key and in the file's order."""
    document = VerdictDocument.read(path.parent)
    for entry in document.checks:
        result = entry.result()
        typed = {"classification", "skip_reason", "limit_max_concurrency", "limit_max_context"}
        assert not (typed | {"limit_disable_feature"}) & set(result.measurements), entry.id
        assert (result.skip_reason is None) == ("skip_reason" not in entry.measurements)
        assert (result.classification is None) == ("classification" not in entry.measurements)
        again = CheckEntry.of(result)
        assert list(again.measurements.items()) == list(entry.measurements.items()), entry.id
    raw = json.loads(path.read_text())
    assert document.to_json()["checks"] == raw["checks"]


def test_a_capacity_classification_is_written_first_and_its_limit_last() -> None:
    """capacity's `classified`: classification, then the phase's measurements, then the limit,
    with a server-log count the runtime log adds afterwards still last."""
    result = classified(
        "capacity.concurrency",
        Capacity(Action.LIMIT_TRAFFIC, "queue grew", ceiling=4),
        {"steps": 3, "ceiling": 4},
        (),
    )
    assert result.classification is Classification.LIMIT_TRAFFIC
    assert result.limits == CheckLimits(max_concurrency=4)
    later = CheckResult(
        result.id,
        result.check_class,
        result.critical,
        result.status,
        result.summary,
        {**result.measurements, "server_log_errors": 2},
        result.evidence,
        result.classification,
        result.limits,
    )
    assert list(recorded_measurements(later)) == [
        "classification",
        "steps",
        "ceiling",
        "limit_max_concurrency",
        "server_log_errors",
    ]


def test_a_coverage_gap_and_an_agent_feature_keep_their_places() -> None:
    """A coverage gap's classification and skip_reason before its gaps, a config skip's reason
    first; a bounded Agent defect's classification and feature after its measurements."""
    gap = CheckResult(
        "agent.coverage",
        CheckClass.AGENT,
        True,
        Status.SKIPPED,
        "gap",
        {"not_used": None, "gaps": "x"},
        classification=Classification.PROGRAMME_INCOMPLETE,
        skip_reason=SkipReason.LEFT_OUT,
    )
    assert list(recorded_measurements(gap)) == [
        "not_used",
        "classification",
        "skip_reason",
        "gaps",
    ]
    skipped = CheckResult(
        "smoke.multimodal",
        CheckClass.SMOKE,
        False,
        Status.SKIPPED,
        "no images",
        skip_reason=SkipReason.NOT_USED,
    )
    assert recorded_measurements(skipped) == {"skip_reason": "not-used"}
    feature = CheckResult(
        "agent.one_arg.auto",
        CheckClass.AGENT,
        False,
        Status.WARN,
        "bounded",
        {"runs": 6},
        classification=Classification.LIMIT_FEATURE,
        limits=CheckLimits(disable_feature="tool_choice=auto"),
    )
    assert recorded_measurements(feature) == {
        "runs": 6,
        "classification": "limit-feature",
        "limit_disable_feature": "tool_choice=auto",
    }
    assert list(recorded_measurements(feature))[-2:] == ["classification", "limit_disable_feature"]
