"""Frozen result types shared by every layer: check results, outcomes, decisions."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


class Status(enum.StrEnum):
    """What a single check found. Only `pass` counts as evidence of health."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NO_DATA = "no_data"
    ERROR = "error"
    SKIPPED = "skipped"


class CheckClass(enum.StrEnum):
    """The checklist layer a check belongs to."""

    ENVIRONMENT = "environment"
    STARTUP = "startup"
    SMOKE = "smoke"
    CAPACITY = "capacity"
    CACHE = "cache"
    AGENT = "agent"
    INTEGRITY = "integrity"


class Outcome(enum.StrEnum):
    """The checklist's outcomes, in increasing severity."""

    GO_LIVE = "go-live"
    SECTION_PASSED = "section-passed"  # part of the programme ran and found nothing wrong
    OBSERVE_WITH_LIMITS = "observe-with-limits"
    HOLD = "hold"
    EXPAND_CAPACITY = "expand-capacity"
    REBUILD = "rebuild"

    @property
    def exit_code(self) -> int:
        """Documented exit status; 2 is reserved for usage and config errors."""
        return _EXIT_CODES[self]

    @property
    def severity(self) -> int:
        """Worse outcomes have larger numbers; the worst fired rule wins."""
        return list(Outcome).index(self)


_EXIT_CODES: Mapping[Outcome, int] = {
    Outcome.GO_LIVE: 0,
    Outcome.SECTION_PASSED: 0,
    Outcome.OBSERVE_WITH_LIMITS: 10,
    Outcome.HOLD: 11,
    Outcome.EXPAND_CAPACITY: 12,
    Outcome.REBUILD: 13,
}

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_NOT_MEASURABLE = 4  # preflight: the target cannot be measured at all (no bundle)


class SkipReason(enum.StrEnum):
    """Why a check was skipped on purpose (verdict.json keeps it as the check's measurement
    `skip_reason`); a skipped check with none is evidence that is missing."""

    NOT_USED = "not-used"  # the config itself rules the class out (not a gap in the evidence)
    LEFT_OUT = "left-out"  # a part of the programme did not run (`checks/coverage.py`)


NOT_USED = SkipReason.NOT_USED


class Classification(enum.StrEnum):
    """What a classified check concluded: the decision's rules read it (verdict.json keeps it
    as the check's measurement `classification`). The capacity phases' actions
    (`checks/capacity/rules.Action`), a bounded non-critical Agent defect, a coverage gap."""

    STABLE = "stable"
    ADJUST_CONFIGURATION = "adjust-configuration"
    LIMIT_TRAFFIC = "limit-traffic"
    EXPAND_CAPACITY = "expand-capacity"
    FIRST_STEP_FAILED = "first-step-failure"
    NO_DATA = "no-data"
    SERVER_REFUSED = "server-refused"
    INCONSISTENT = "inconsistent-limits"
    STALLED = "engine-stalled"
    CONTINUES = "failure-continues"
    LIMIT_FEATURE = "limit-feature"  # a bounded defect of a non-critical Agent feature
    PROGRAMME_INCOMPLETE = "programme-incomplete"  # a coverage gap (`checks/coverage.py`)


@dataclass(frozen=True, slots=True)
class CheckLimits:
    """The limits a check's finding sets (verdict.json keeps each as the check's measurement
    `limit_<name>`; `verdict.decide.limits` gathers them into verdict.json `limits`)."""

    max_concurrency: int | None = None  # stable only up to this concurrency
    max_context: int | None = None  # stable only up to this context (tokens)
    disable_feature: str | None = None  # go live without this Agent feature


def measured_int(value: object) -> int | None:
    """A measurement read back as an integer (None: absent, or not an integer; a bool is
    not one). The typed accessors beside each measurement's writer use it."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def measured_number(value: object) -> float | None:
    """A measurement read back as a number, int or float as it was written (None: absent, or
    not a number; a bool is not one)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def measured_float(value: object) -> float | None:
    """A measurement or saved figure read back as a float (None: absent, or not a number; a
    bool is not one)."""
    number = measured_number(value)
    return None if number is None else float(number)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's finding (verdict.json `checks`: `verdict.document.CheckEntry`, which
    writes `classification`, `limits` and `skip_reason` back among the measurements:
    `verdict/recorded.py`)."""

    id: str
    check_class: CheckClass
    critical: bool
    status: Status
    summary: str
    measurements: Mapping[str, float | int | str | bool | None] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    classification: Classification | None = None
    limits: CheckLimits = CheckLimits()
    skip_reason: SkipReason | None = None


@dataclass(frozen=True, slots=True)
class ResultsOf:
    """The one place a `CheckResult` is assembled: a family binds its check class, the
    evidence its checks cite unless one says otherwise, and whether they are critical unless
    one says otherwise; each result then names its id, status and summary (and measurements),
    everything else by keyword. Measurements are copied into a dict, evidence into a tuple."""

    check_class: CheckClass
    evidence: tuple[str, ...] = ()
    critical: bool = True

    def __call__(
        self,
        check_id: str,
        status: Status,
        summary: str,
        measurements: Mapping[str, float | int | str | bool | None] | None = None,
        *,
        critical: bool | None = None,
        evidence: Sequence[str] | None = None,
        classification: Classification | None = None,
        limits: CheckLimits = CheckLimits(),
        skip_reason: SkipReason | None = None,
    ) -> CheckResult:
        return CheckResult(
            check_id,
            self.check_class,
            self.critical if critical is None else critical,
            status,
            summary,
            dict(measurements or {}),
            self.evidence if evidence is None else tuple(evidence),
            classification,
            limits,
            skip_reason,
        )


ENVIRONMENT_RESULT = ResultsOf(CheckClass.ENVIRONMENT)
STARTUP_RESULT = ResultsOf(CheckClass.STARTUP)
CAPACITY_RESULT = ResultsOf(CheckClass.CAPACITY)
AGENT_RESULT = ResultsOf(CheckClass.AGENT)
INTEGRITY_RESULT = ResultsOf(CheckClass.INTEGRITY)


@dataclass(frozen=True, slots=True)
class RuleFired:
    """A decision rule that produced an outcome, with the checks behind it."""

    rule: str
    outcome: Outcome
    reason: str
    check_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome and every rule that fired; the worst rule decides."""

    outcome: Outcome
    rules_fired: tuple[RuleFired, ...]
    waived: tuple[str, ...] = ()  # warns the policy waived by name (verdict.json `waivers`)
