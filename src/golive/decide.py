"""The decision: a pure function from check results to one outcome and the rules behind it.

Fail-closed: a critical check that could not measure (`no_data`, `error`) never passes.
Every rule that fires is kept; the worst outcome wins
(rebuild > expand-capacity > hold > observe-with-limits > go-live).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def critical_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    failed = [
        c.id
        for c in checks
        if c.critical and c.status is Status.FAIL and c.check_class not in _FAILURE_OUTCOME
    ]
    if not failed:
        return None
    return RuleFired(
        "critical-failure",
        Outcome.HOLD,
        "a critical check failed; do not go live until it is fixed",
        tuple(failed),
    )


RULES: tuple[Rule, ...] = (nothing_measured, missing_evidence, environment_failed, critical_failed)


def decide(checks: Sequence[CheckResult], rules: Sequence[Rule] = RULES) -> Decision:
    fired = tuple(r for rule in rules if (r := rule(checks)) is not None)
    outcome = max((r.outcome for r in fired), key=lambda o: o.severity, default=Outcome.GO_LIVE)
    return Decision(outcome, fired)
