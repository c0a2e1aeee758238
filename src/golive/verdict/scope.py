"""What a bundle covers: the whole acceptance programme, or some of its sections.

Only a bundle that holds every part of the programme (version chain, request classes, the
four pressure phases, cache proof, Agent contract) can be `go-live` or observe-with-limits
that a reviewer may sign. A section command that finds nothing wrong is `section-passed`.
Pure: decided from the check ids in a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from golive.checks.coverage import COVERAGE, named_gaps
from golive.results import (
    CheckClass,
    CheckResult,
    Classification,
    Outcome,
    RuleFired,
    SkipReason,
    Status,
)

PROGRAMME = "programme"
SECTIONS: tuple[str, ...] = ("env", "smoke", "capacity", "cache", "agent")
CAPACITY_PHASES: tuple[str, ...] = (
    "capacity.model_load",
    "capacity.long_input",
    "capacity.concurrency",
    "capacity.sustained",
)

Scope = str | tuple[str, ...]


def scope_json(scope: Scope) -> str | list[str]:
    return scope if isinstance(scope, str) else list(scope)


def scope_from_json(value: object) -> Scope:
    """verdict.json `scope`; bundles written before the field existed were sections."""
    if value == PROGRAMME:
        return PROGRAMME
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


def _ran(check: CheckResult) -> bool:
    return check.status is not Status.SKIPPED or not check.id.endswith(".programme")


def missing_parts(checks: Sequence[CheckResult]) -> list[str]:
    """The programme's parts this list of results does not hold (empty: complete). A
    family's coverage check says what it left out; it is not a part that ran."""
    present = {c.id for c in checks if _ran(c) and not c.id.endswith(COVERAGE)}
    classes = {c.check_class for c in checks if _ran(c)}
    missing = []
    if not classes & {CheckClass.ENVIRONMENT, CheckClass.STARTUP}:
        missing.append("env (version chain)")
    if not any(i.startswith("smoke.") and i != "smoke.programme" for i in present):
        missing.append("smoke (request classes)")
    phases = [p for p in CAPACITY_PHASES if p not in present]
    if phases:
        missing.append(f"capacity ({', '.join(phases)})")
    if "cache.prefix_reuse" not in present:
        missing.append("cache (cache.prefix_reuse)")
    if not any(i.startswith("agent.") and i != "agent.programme" for i in present):
        missing.append("agent (the Agent contract)")
    return missing


def sections_missing(scope: Scope) -> list[str]:
    """The sections a section bundle still needs before a go-live decision."""
    if scope == PROGRAMME:
        return []
    return [s for s in SECTIONS if s not in scope]


def skipped_by_config(check: CheckResult) -> bool:
    """Skipped because the config says the class is not used (not evidence that is missing)."""
    return check.status is Status.SKIPPED and check.skip_reason is SkipReason.NOT_USED


def left_out(check: CheckResult) -> bool:
    """A family's coverage check saying a part of the programme did not run (or too few
    times): the programme-incomplete rule judges it, not as missing evidence."""
    return (
        check.status is Status.SKIPPED
        and check.classification is Classification.PROGRAMME_INCOMPLETE
    )


def coverage_gaps(checks: Sequence[CheckResult]) -> tuple[list[str], tuple[str, ...]]:
    """What the families' coverage checks say was left out or run too few times, and their
    ids (`checks/coverage.py`)."""
    hit = [c for c in checks if left_out(c)]
    gaps: list[str] = []
    for c in hit:
        gaps += named_gaps(c.measurements) or [c.summary]
    return gaps, tuple(c.id for c in hit)


def programme_incomplete(checks: Sequence[CheckResult], scope: Scope) -> RuleFired | None:
    """A programme missing a part, or whose parts left out a class or case or ran too few
    repeats: hold. A section bundle with such a gap only names it (a programme combined from
    it will be incomplete)."""
    if not checks:
        return None
    gaps, ids = coverage_gaps(checks)
    if scope != PROGRAMME:
        if not gaps:
            return None
        return RuleFired(
            "programme-incomplete",
            Outcome.SECTION_PASSED,
            f"this section leaves out {'; '.join(gaps)}: a programme combined from it is "
            "incomplete",
            ids,
        )
    missing = missing_parts(checks) + gaps
    if not missing:
        return None
    return RuleFired(
        "programme-incomplete",
        Outcome.HOLD,
        f"the programme is missing {'; '.join(missing)}: a go-live decision needs every part",
        ids,
    )


def section_only(checks: Sequence[CheckResult], scope: Scope) -> RuleFired | None:
    missing = sections_missing(scope)
    if not missing or not checks:
        return None
    ran = ", ".join(scope) if scope else "none"
    return RuleFired(
        "section-only",
        Outcome.SECTION_PASSED,
        f"sections run: {ran}; still missing before a go-live decision: {', '.join(missing)} "
        "(golive run, or golive decide --combine over section bundles)",
        (),
    )
