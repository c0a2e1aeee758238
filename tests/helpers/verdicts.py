"""Small verdicts for tests of what reads one (reports, sign-off): the typed verdict.json,
with only the fields a test is about set."""

from __future__ import annotations

from golive.results import CheckClass, Outcome, Status
from golive.verdict.document import ActionEntry, CheckEntry, VerdictDocument


def check(check_id: str, status: str, *evidence: str) -> CheckEntry:
    """A critical check of the class its id names, with a placeholder summary."""
    family = check_id.split(".", maxsplit=1)[0]
    known = {c.value for c in CheckClass}
    return CheckEntry(
        id=check_id,
        check_class=CheckClass(family if family in known else "integrity"),
        critical=True,
        status=Status(status),
        summary=f"{check_id} {status}",
        evidence=evidence,
    )


def action(check_id: str, owner: str, deadline: str, rollback: str) -> ActionEntry:
    return ActionEntry(check=check_id, owner=owner, deadline=deadline, rollback=rollback)


def verdict(
    outcome: str, checks: tuple[CheckEntry, ...] = (), actions: tuple[ActionEntry, ...] = ()
) -> VerdictDocument:
    return VerdictDocument(
        outcome=Outcome(outcome),
        profile="generic",
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:10:00+00:00",
        golive_version="0.1.0",
        checks=checks,
        rules_fired=(),
        actions=actions,
    )
