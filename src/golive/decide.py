"""The decision: a pure function from check results to one outcome and the rules behind it.

Fail-closed: a critical check that could not measure (`no_data`, `error`) never passes.
Every rule that fires is kept; the worst outcome wins
(rebuild > expand-capacity > hold > observe-with-limits > go-live).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from golive.results import CheckClass, CheckResult, Decision, Outcome, RuleFired, Status

Rule = Callable[[Sequence[CheckResult]], RuleFired | None]

# Where a failed critical check points, by the checklist layer it belongs to.
_FAILURE_OUTCOME = {
    CheckClass.ENVIRONMENT: Outcome.REBUILD,
    CheckClass.STARTUP: Outcome.REBUILD,
}


def nothing_measured(checks: Sequence[CheckResult]) -> RuleFired | None:
    if checks:
        return None
    return RuleFired("nothing-measured", Outcome.HOLD, "no check produced a result", ())


def missing_evidence(checks: Sequence[CheckResult]) -> RuleFired | None:
    missing = [c.id for c in checks if c.critical and c.status in (Status.NO_DATA, Status.ERROR)]
    if not missing:
        return None
    return RuleFired(
        "missing-evidence",
        Outcome.HOLD,
        "critical evidence is missing or unreadable, so nothing can be approved",
        tuple(missing),
    )


def interrupted(checks: Sequence[CheckResult]) -> RuleFired | None:
    if not any(c.id == "golive.interrupted" for c in checks):
        return None
    return RuleFired(
        "interrupted",
        Outcome.HOLD,
        "golive was stopped by a signal before the programme finished; the bundle is partial",
        ("golive.interrupted",),
    )


def environment_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    failed = [
        c.id
        for c in checks
        if c.critical and c.status is Status.FAIL and c.check_class in _FAILURE_OUTCOME
    ]
    if not failed:
        return None
    return RuleFired(
        "environment-mismatch",
        Outcome.REBUILD,
        "the environment is not the supported chain, or it failed to start",
        tuple(failed),
    )


def _classification(check: CheckResult) -> str | None:
    value = check.measurements.get("classification")
    return str(value) if value is not None else None


def capacity_exhausted(checks: Sequence[CheckResult]) -> RuleFired | None:
    """OOM, queue collapse, stalls or restarts after reasonable limits."""
    hit = [c.id for c in checks if _classification(c) == "expand-capacity"]
    if not hit:
        return None
    return RuleFired(
        "capacity-exhausted",
        Outcome.EXPAND_CAPACITY,
        "sustained load causes OOM, failures, queue collapse or engine termination: expand "
        "capacity or redesign the deployment",
        tuple(hit),
    )


def capacity_limited(checks: Sequence[CheckResult]) -> RuleFired | None:
    """Stable only under a lower ceiling, or context above the intended envelope."""
    hit = [c.id for c in checks if _classification(c) in ("limit-traffic", "adjust-configuration")]
    if not hit:
        return None
    return RuleFired(
        "capacity-limited",
        Outcome.OBSERVE_WITH_LIMITS,
        "stable only inside a smaller envelope: cap traffic at the measured limits",
        tuple(hit),
    )


def agent_feature_limited(checks: Sequence[CheckResult]) -> RuleFired | None:
    """A bounded defect on a non-critical Agent feature: go live without that feature."""
    hit = [c.id for c in checks if _classification(c) == "limit-feature"]
    if not hit:
        return None
    return RuleFired(
        "agent-feature-limited",
        Outcome.OBSERVE_WITH_LIMITS,
        "a non-critical Agent feature fails in a bounded way: disable or rate-limit it "
        "(limits.disable_features) and watch it",
        tuple(hit),
    )


def agent_protocol_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    failed = [
        c.id
        for c in checks
        if c.critical and c.status is Status.FAIL and c.check_class is CheckClass.AGENT
    ]
    if not failed:
        return None
    return RuleFired(
        "agent-protocol-failure",
        Outcome.HOLD,
        "repeated protocol or parser failure on a critical path",
        tuple(failed),
    )


def limits(checks: Sequence[CheckResult]) -> dict[str, Any]:
    """The envelope the measurements allow (verdict.json `limits`)."""
    found: dict[str, Any] = {}
    features = sorted(
        {
            str(c.measurements["limit_disable_feature"])
            for c in checks
            if c.measurements.get("limit_disable_feature")
        }
    )
    if features:
        found["disable_features"] = features
    for check in checks:
        for key, name in (
            ("limit_max_concurrency", "max_concurrency"),
            ("limit_max_context", "max_context"),
        ):
            value = check.measurements.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                found[name] = min(value, found.get(name, value))
    return found


def critical_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    failed = [
        c.id
        for c in checks
        if c.critical
        and c.status is Status.FAIL
        and c.check_class not in _FAILURE_OUTCOME
        and c.check_class is not CheckClass.AGENT
        and _classification(c) is None
    ]
    if not failed:
        return None
    return RuleFired(
        "critical-failure",
        Outcome.HOLD,
        "a critical check failed; do not go live until it is fixed",
        tuple(failed),
    )


RULES: tuple[Rule, ...] = (
    nothing_measured,
    interrupted,
    missing_evidence,
    environment_failed,
    capacity_exhausted,
    capacity_limited,
    agent_feature_limited,
    agent_protocol_failed,
    critical_failed,
)


def decide(checks: Sequence[CheckResult], rules: Sequence[Rule] = RULES) -> Decision:
    fired = tuple(r for rule in rules if (r := rule(checks)) is not None)
    outcome = max((r.outcome for r in fired), key=lambda o: o.severity, default=Outcome.GO_LIVE)
    return Decision(outcome, fired)
