"""The decision: a pure function from check results to one outcome and the rules behind it.

Fail-closed: `go-live` needs the whole programme with every check `pass` (or skipped because
the config says the class is not used). A critical check that could not measure (`no_data`,
`error`, an unexplained `skipped`) is `hold`; a non-critical one, or any `warn` the policy
does not waive by name, is at best observe-with-limits. A section bundle that finds nothing
wrong is `section-passed`, never `go-live`. Every rule that fires is kept; the worst outcome
wins (rebuild > expand-capacity > hold > observe-with-limits > section-passed > go-live).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from golive.checks.capacity.measured import ramp_ceiling
from golive.results import (
    CheckClass,
    CheckResult,
    Classification,
    Decision,
    Outcome,
    RuleFired,
    Status,
)
from golive.verdict.document import Limits
from golive.verdict.scope import (
    PROGRAMME,
    Scope,
    left_out,
    programme_incomplete,
    section_only,
    skipped_by_config,
)

Rule = Callable[[Sequence[CheckResult]], RuleFired | None]
# Classifications that a capacity or Agent rule already judges (with limits named).
_CLASSIFIED = (
    Classification.EXPAND_CAPACITY,
    Classification.LIMIT_TRAFFIC,
    Classification.ADJUST_CONFIGURATION,
    Classification.LIMIT_FEATURE,
    Classification.STALLED,
    Classification.FIRST_STEP_FAILED,
    Classification.CONTINUES,
)

# Findings no capacity fixes: a failure at the lowest load, a hung engine, a failure that
# continued under the limit its own death set (with no saturation behind it).
_DEFECTS = (  # findings no capacity fixes: judged before any capacity is concluded
    Classification.FIRST_STEP_FAILED,
    Classification.STALLED,
    Classification.CONTINUES,
    Classification.SERVER_REFUSED,
    Classification.INCONSISTENT,
)

# Where a failed critical check points, by the checklist layer it belongs to.
_FAILURE_OUTCOME = {
    CheckClass.ENVIRONMENT: Outcome.REBUILD,
    CheckClass.STARTUP: Outcome.REBUILD,
}


def nothing_measured(checks: Sequence[CheckResult]) -> RuleFired | None:
    if checks:
        return None
    return RuleFired("nothing-measured", Outcome.HOLD, "no check produced a result", ())


def _unmeasured(check: CheckResult) -> bool:
    """No evidence: could not measure, crashed, or skipped for a reason that is not config
    (nor a part the programme left out: the programme-incomplete rule names those)."""
    if check.status is Status.SKIPPED:
        return not skipped_by_config(check) and not left_out(check)
    return check.status in (Status.NO_DATA, Status.ERROR)


def missing_evidence(checks: Sequence[CheckResult]) -> RuleFired | None:
    missing = [c.id for c in checks if c.critical and _unmeasured(c)]
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


def _environment_proven(checks: Sequence[CheckResult]) -> bool:
    """Every critical chain/startup check present and passed: a failure under load is then
    the capacity's, not an unknown environment's."""
    chain = [c for c in checks if c.check_class in _FAILURE_OUTCOME and c.critical]
    return bool(chain) and all(c.status is Status.PASS for c in chain)


def engine_stalled(checks: Sequence[CheckResult]) -> RuleFired | None:
    """No token with requests in flight (while /health may still say 200): a hung engine is a
    software fault to fix, never a capacity limit or a reason to buy GPUs."""
    hit = [c.id for c in checks if c.classification is Classification.STALLED]
    if not hit:
        return None
    return RuleFired(
        "engine-stalled",
        Outcome.HOLD,
        "the engine stopped producing tokens with requests in flight (engine stalled with "
        "/health 200 unless the check says otherwise): a software fault, not capacity — "
        "capture its stacks (py-spy dump) and fix or report it before going live",
        tuple(hit),
    )


def first_step_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    """Failures at the lowest load (concurrency 1, the smallest input): a software or
    configuration defect, or a deployment that cannot serve one request. Never capacity:
    buying GPUs does not fix a server that fails its first request."""
    hit = [c.id for c in checks if c.classification is Classification.FIRST_STEP_FAILED]
    if not hit:
        return None
    return RuleFired(
        "first-step-failure",
        Outcome.HOLD,
        "requests failed at the lowest load of a ladder (concurrency 1 or the smallest "
        "input): a software or configuration defect, not capacity; the check quotes the "
        "server and names the request class: fix it and run again",
        tuple(hit),
    )


def failure_continued(checks: Sequence[CheckResult]) -> RuleFired | None:
    """The engine died above a stable step, was restarted, and failed again at that step: the
    failure is not explained by the load above it, and no limit is known to hold."""
    hit = [c.id for c in checks if c.classification is Classification.CONTINUES]
    if not hit:
        return None
    return RuleFired(
        "failure-continues",
        Outcome.HOLD,
        "the engine failed again at the ramp's last stable step after it was restarted: the "
        "failure continues under the limit its death set, with no saturation evidence, so no "
        "traffic limit is known to hold; find its cause (the termination records, the server "
        "log) before going live",
        tuple(hit),
    )


def capacity_exhausted(checks: Sequence[CheckResult]) -> RuleFired | None:
    """OOM, queue collapse, stalls or restarts after reasonable limits, on a proven chain."""
    hit = [c.id for c in checks if c.classification is Classification.EXPAND_CAPACITY]
    if not hit:
        return None
    if not _environment_proven(checks):
        return RuleFired(
            "capacity-unattributed",
            Outcome.HOLD,
            "the engine failed under load, but the environment is not proven (its critical "
            "chain and startup checks did not all pass here), so the failure cannot be put on "
            "capacity: provide the version chain (--log, --host-info, --container-info, "
            "--image) and run again before concluding expand-capacity",
            tuple(hit),
        )
    defects = [c.id for c in checks if c.classification in _DEFECTS]
    # the long-input ladder's own expand already rests on smaller inputs it served
    ramp_needed = any(h != "capacity.long_input" for h in hit)
    if defects or (ramp_needed and not _stable_step(checks)):
        return RuleFired(
            "capacity-unattributed",
            Outcome.HOLD,
            "the engine failed under load, but "
            + (
                f"{', '.join(defects)} found a defect (a failure at the lowest load, a stall, "
                "a refusal or limits the server does not keep) that no capacity fixes"
                if defects
                else _no_ceiling(checks)
            )
            + ": capacity cannot be concluded until that is fixed and the ramp runs again",
            tuple(hit),
        )
    return RuleFired(
        "capacity-exhausted",
        Outcome.EXPAND_CAPACITY,
        "sustained load causes OOM, failures, queue collapse or engine termination: expand "
        "capacity or redesign the deployment",
        tuple(hit),
    )


def _no_ceiling(checks: Sequence[CheckResult]) -> str:
    ramp = next((c for c in checks if c.id == "capacity.concurrency"), None)
    if ramp is None or ramp.status in (Status.NO_DATA, Status.SKIPPED):
        return "the concurrency ramp did not measure a ceiling (capacity.concurrency: no data)"
    return "no ramp step was stable (capacity.concurrency has no ceiling)"


def _stable_step(checks: Sequence[CheckResult]) -> bool:
    """The ramp found a ceiling: at least one step of load was stable."""
    ramp = next((c for c in checks if c.id == "capacity.concurrency"), None)
    ceiling = None if ramp is None else ramp_ceiling(ramp.measurements)
    return ceiling is not None and ceiling >= 1


def capacity_limited(checks: Sequence[CheckResult]) -> RuleFired | None:
    """Stable only under a lower ceiling, or context above the intended envelope."""
    limited = (Classification.LIMIT_TRAFFIC, Classification.ADJUST_CONFIGURATION)
    hit = [c.id for c in checks if c.classification in limited]
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
    hit = [c.id for c in checks if c.classification is Classification.LIMIT_FEATURE]
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


def limits(checks: Sequence[CheckResult]) -> Limits:
    """The envelope the measurements allow (verdict.json `limits`): the lowest of each limit
    the checks set, and every feature to go live without."""
    features = sorted({f for c in checks if (f := c.limits.disable_feature)})
    # A run in which golive itself was the bottleneck in any load window sets no concurrency
    # limit: its client was not shown to keep up, so no window of it measures the server's.
    starved = any(
        c.id.split("@")[0] == "golive.client_headroom" and c.status is Status.FAIL for c in checks
    )
    concurrency = (
        [] if starved else [n for c in checks if (n := c.limits.max_concurrency) is not None]
    )
    context = [n for c in checks if (n := c.limits.max_context) is not None]
    return Limits(
        max_concurrency=min(concurrency, default=None),
        max_context=min(context, default=None),
        disable_features=tuple(features),
    )


def critical_failed(checks: Sequence[CheckResult]) -> RuleFired | None:
    failed = [
        c.id
        for c in checks
        if c.critical
        and c.status is Status.FAIL
        and c.check_class not in _FAILURE_OUTCOME
        and c.check_class is not CheckClass.AGENT
        and c.classification not in _CLASSIFIED
    ]
    if not failed:
        return None
    return RuleFired(
        "critical-failure",
        Outcome.HOLD,
        "a critical check failed; do not go live until it is fixed",
        tuple(failed),
    )


def non_critical_defect(checks: Sequence[CheckResult]) -> RuleFired | None:
    """A non-critical check that failed or has no evidence: never a silent pass."""
    hit = [
        c.id
        for c in checks
        if not c.critical
        and (c.status is Status.FAIL or _unmeasured(c))
        and c.classification not in _CLASSIFIED
    ]
    if not hit:
        return None
    return RuleFired(
        "non-critical-unproven",
        Outcome.OBSERVE_WITH_LIMITS,
        "non-critical checks failed or have no evidence: go live only with these named as "
        "known gaps, each with an owner (actions), or provide the evidence",
        tuple(hit),
    )


def warned(checks: Sequence[CheckResult], waived: Collection[str] = ()) -> RuleFired | None:
    """A warn is not a pass: each is a watch item with an owner, unless waived by name."""
    hit = [
        c.id
        for c in checks
        if c.status is Status.WARN and c.classification not in _CLASSIFIED and c.id not in waived
    ]
    if not hit:
        return None
    return RuleFired(
        "warnings-observed",
        Outcome.OBSERVE_WITH_LIMITS,
        "checks passed with warnings: each is watched with an owner, deadline and rollback "
        "action (actions), or waived by name in the policy",
        tuple(hit),
    )


RULES: tuple[Rule, ...] = (
    nothing_measured,
    interrupted,
    missing_evidence,
    environment_failed,
    engine_stalled,
    first_step_failed,
    failure_continued,
    capacity_exhausted,
    capacity_limited,
    agent_feature_limited,
    agent_protocol_failed,
    critical_failed,
    non_critical_defect,
)


def decide(
    checks: Sequence[CheckResult], scope: Scope = PROGRAMME, waived: Collection[str] = ()
) -> Decision:
    """`scope`: PROGRAMME or the sections that ran; `waived`: warn check ids the policy
    waives by name (only warns can be waived)."""
    waived_warns = tuple(c.id for c in checks if c.status is Status.WARN and c.id in waived)
    fired = [r for rule in RULES if (r := rule(checks)) is not None]
    fired += [
        r
        for r in (
            warned(checks, waived_warns),
            programme_incomplete(checks, scope),
            section_only(checks, scope),
        )
        if r is not None
    ]
    outcome = max((r.outcome for r in fired), key=lambda o: o.severity, default=Outcome.GO_LIVE)
    return Decision(outcome, tuple(fired), waived_warns)
