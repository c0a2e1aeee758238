"""`ResultsOf`, the one constructor of check results: a family's binding supplies the check
class, the evidence and the criticality its checks share; a check may override each."""

from __future__ import annotations

from golive.checks.cache.rules import CACHE_RESULT
from golive.checks.smoke.judge import SMOKE_RESULT
from golive.results import (
    ENVIRONMENT_RESULT,
    CheckClass,
    CheckLimits,
    CheckResult,
    Classification,
    ResultsOf,
    SkipReason,
    Status,
)


def test_the_family_binding_supplies_class_evidence_and_criticality() -> None:
    """A result built through a family's binding carries that family's class and default
    evidence, and is critical unless it says otherwise."""
    result = CACHE_RESULT("cache.prefix_reuse", Status.PASS, "reused", {"hits": 3})
    assert result == CheckResult(
        "cache.prefix_reuse",
        CheckClass.CACHE,
        True,
        Status.PASS,
        "reused",
        {"hits": 3},
        ("requests/cache.jsonl", "metrics/cache-steps.jsonl"),
    )
    assert SMOKE_RESULT("smoke.health", Status.FAIL, "down").evidence == ("requests/smoke.jsonl",)
    assert ENVIRONMENT_RESULT("environment.gpus", Status.PASS, "ok").evidence == ()


def test_a_check_overrides_evidence_and_criticality_by_keyword() -> None:
    """Explicit evidence (even none) replaces the family's default and is kept as a tuple;
    an explicit `critical=False` makes the check non-critical."""
    cited = CACHE_RESULT(
        "cache.controls", Status.NO_DATA, "no steps", critical=False, evidence=["a.jsonl"]
    )
    assert cited.evidence == ("a.jsonl",)
    assert cited.critical is False
    assert CACHE_RESULT("cache.retention", Status.PASS, "kept", evidence=[]).evidence == ()


def test_measurements_are_copied_not_aliased() -> None:
    """A judge that keeps editing its measurements dict after building a result does not
    change the result it already returned; key order is kept as given."""
    measurements: dict[str, float | int | str | bool | None] = {"b": 1, "a": None}
    result = ResultsOf(CheckClass.AGENT)("agent.x", Status.WARN, "flaky", measurements)
    measurements["b"] = 99
    measurements["c"] = "late"
    assert result.measurements == {"b": 1, "a": None}
    assert list(result.measurements) == ["b", "a"]
    assert ResultsOf(CheckClass.AGENT)("agent.y", Status.PASS, "ok").measurements == {}


def test_classification_limits_and_skip_reason_pass_through() -> None:
    """The decision's inputs (classification, limits, skip reason) reach the result as given,
    and are absent when not given."""
    limits = CheckLimits(max_concurrency=8)
    result = ResultsOf(CheckClass.CAPACITY)(
        "capacity.concurrency",
        Status.WARN,
        "limit traffic",
        classification=Classification.LIMIT_TRAFFIC,
        limits=limits,
        skip_reason=SkipReason.LEFT_OUT,
    )
    assert (result.classification, result.limits, result.skip_reason) == (
        Classification.LIMIT_TRAFFIC,
        limits,
        SkipReason.LEFT_OUT,
    )
    plain = ResultsOf(CheckClass.CAPACITY)("capacity.slo", Status.PASS, "met")
    assert (plain.classification, plain.limits, plain.skip_reason) == (None, CheckLimits(), None)
