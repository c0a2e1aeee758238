"""The decision table: fail-closed, worst rule wins, every fired rule kept."""

from __future__ import annotations

import pytest

from golive.decide import decide, limits
from golive.results import CheckClass, CheckResult, Outcome, Status


def _c(
    cid: str,
    status: Status,
    critical: bool = True,
    cls: CheckClass = CheckClass.SMOKE,
    **measurements: str | int,
) -> CheckResult:
    return CheckResult(cid, cls, critical, status, f"{cid} {status}", measurements)


AGENT, CAPACITY, CACHE = CheckClass.AGENT, CheckClass.CAPACITY, CheckClass.CACHE


@pytest.mark.parametrize(
    ("checks", "outcome", "rules"),
    [
        ([_c("a", Status.PASS), _c("b", Status.PASS)], Outcome.GO_LIVE, []),
        ([], Outcome.HOLD, ["nothing-measured"]),
        ([_c("a", Status.PASS), _c("m", Status.NO_DATA)], Outcome.HOLD, ["missing-evidence"]),
        ([_c("a", Status.ERROR)], Outcome.HOLD, ["missing-evidence"]),
        ([_c("a", Status.FAIL)], Outcome.HOLD, ["critical-failure"]),
        ([_c("a", Status.FAIL, critical=False)], Outcome.GO_LIVE, []),
        ([_c("a", Status.NO_DATA, critical=False)], Outcome.GO_LIVE, []),
        ([_c("a", Status.WARN)], Outcome.GO_LIVE, []),
        (
            [_c("e", Status.FAIL, cls=CheckClass.ENVIRONMENT)],
            Outcome.REBUILD,
            ["environment-mismatch"],
        ),
        (
            [
                _c("e", Status.FAIL, cls=CheckClass.STARTUP),
                _c("s", Status.FAIL),
                _c("m", Status.NO_DATA),
            ],
            Outcome.REBUILD,
            ["missing-evidence", "environment-mismatch", "critical-failure"],
        ),
        # the checklist's explicit logic, one row each
        (  # startup OOM: correct the environment or topology
            [_c("capacity.model_load", Status.FAIL, cls=CheckClass.STARTUP)],
            Outcome.REBUILD,
            ["environment-mismatch"],
        ),
        (  # sustained OOM after controlled limits
            [_c("capacity.sustained", Status.FAIL, cls=CAPACITY, classification="expand-capacity")],
            Outcome.EXPAND_CAPACITY,
            ["capacity-exhausted"],
        ),
        (  # prefix-cache flag present, no measured reuse
            [_c("cache.prefix_reuse", Status.FAIL, cls=CACHE)],
            Outcome.HOLD,
            ["critical-failure"],
        ),
        (  # non-critical, bounded Agent defect
            [
                _c(
                    "agent.one_arg.auto",
                    Status.WARN,
                    False,
                    AGENT,
                    classification="limit-feature",
                    limit_disable_feature="tool_choice=auto",
                ),
                _c("agent.one_arg.required", Status.PASS, cls=AGENT),
            ],
            Outcome.OBSERVE_WITH_LIMITS,
            ["agent-feature-limited"],
        ),
        (  # repeated protocol or parser failure on a critical path
            [_c("agent.one_arg.required", Status.FAIL, cls=AGENT)],
            Outcome.HOLD,
            ["agent-protocol-failure"],
        ),
        (  # stable only under a lower ceiling
            [
                _c(
                    "capacity.concurrency",
                    Status.WARN,
                    cls=CAPACITY,
                    classification="limit-traffic",
                    limit_max_concurrency=2,
                )
            ],
            Outcome.OBSERVE_WITH_LIMITS,
            ["capacity-limited"],
        ),
        (  # several rules: all listed, the worst wins
            [
                _c("agent.one_arg.auto", Status.WARN, False, AGENT, classification="limit-feature"),
                _c("cache.prefix_reuse", Status.FAIL, cls=CACHE),
                _c(
                    "capacity.sustained",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                ),
            ],
            Outcome.EXPAND_CAPACITY,
            ["capacity-exhausted", "agent-feature-limited", "critical-failure"],
        ),
        (  # a skipped section is never evidence, but not a failure either
            [_c("e", Status.PASS), _c("smoke.programme", Status.SKIPPED, critical=False)],
            Outcome.GO_LIVE,
            [],
        ),
    ],
)
def test_decision_table(checks: list[CheckResult], outcome: Outcome, rules: list[str]) -> None:
    decision = decide(checks)
    assert decision.outcome is outcome
    assert [r.rule for r in decision.rules_fired] == rules


def test_rules_cite_the_checks_behind_them() -> None:
    decision = decide([_c("a", Status.PASS), _c("b", Status.FAIL), _c("c", Status.FAIL)])
    assert decision.rules_fired[0].check_ids == ("b", "c")


def test_exit_codes_are_distinct_and_go_live_is_zero() -> None:
    codes = [o.exit_code for o in Outcome]
    assert Outcome.GO_LIVE.exit_code == 0
    assert len(set(codes)) == len(codes)
    assert 2 not in codes


def test_limits_collect_ceilings_and_features() -> None:
    checks = [
        _c("c", Status.WARN, cls=CAPACITY, limit_max_concurrency=4, limit_max_context=8192),
        _c("d", Status.WARN, cls=CAPACITY, limit_max_concurrency=2),
        _c("a", Status.WARN, False, AGENT, limit_disable_feature="tool_choice=auto"),
    ]
    assert limits(checks) == {
        "disable_features": ["tool_choice=auto"],
        "max_concurrency": 2,
        "max_context": 8192,
    }
