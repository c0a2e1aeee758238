"""The decision table: fail-closed, worst rule wins, every fired rule kept."""

from __future__ import annotations

import pytest

from golive.decide import decide
from golive.results import CheckClass, CheckResult, Outcome, Status


def _c(
    cid: str, status: Status, critical: bool = True, cls: CheckClass = CheckClass.SMOKE
) -> CheckResult:
    return CheckResult(cid, cls, critical, status, f"{cid} {status}")


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
