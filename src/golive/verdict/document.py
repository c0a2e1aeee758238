"""verdict.json as a typed model: the one shape the run writes it from, and `golive decide`,
report, signoff, guardrails, watch and combine read it back with (DESIGN.md §1).

Fields that older golive versions did not write have defaults, so their bundles still read;
an unknown field or a wrong type is an error that names the file and the field.
"""

from __future__ import annotations

import datetime as dt
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from golive.bundle.layout import PARTS, VERDICT
from golive.checks.capacity.long_input import served_context
from golive.checks.capacity.measured import ramp_ceiling, sustained_window
from golive.errors import ConfigError
from golive.results import (
    EXIT_INTERNAL,
    CheckClass,
    CheckResult,
    Decision,
    Outcome,
    ResultsOf,
    Status,
)
from golive.verdict.recorded import Measurement, recorded_measurements, typed_measurements


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CheckEntry(_Entry):
    """One check result, as verdict.json `checks` holds it."""

    id: str
    check_class: CheckClass = Field(alias="class")
    critical: bool
    status: Status
    summary: str
    measurements: dict[str, Measurement] = Field(default_factory=dict)
    evidence: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: CheckResult) -> CheckEntry:
        return cls(
            id=result.id,
            check_class=result.check_class,
            critical=result.critical,
            status=result.status,
            summary=result.summary,
            measurements=recorded_measurements(result),
            evidence=result.evidence,
        )

    def result(self) -> CheckResult:
        typed = typed_measurements(self.measurements)
        return ResultsOf(self.check_class)(
            self.id,
            self.status,
            self.summary,
            typed.measurements,
            critical=self.critical,
            evidence=self.evidence,
            classification=typed.classification,
            limits=typed.limits,
            skip_reason=typed.skip_reason,
        )


class RuleEntry(_Entry):
    """A decision rule that fired (verdict.json `rules_fired`)."""

    rule: str
    outcome: Outcome
    reason: str
    checks: tuple[str, ...]


class Limits(_Entry):
    """The envelope to go live inside (verdict.json `limits`); absent: no such limit."""

    max_concurrency: int | None = None
    max_context: int | None = None
    disable_features: tuple[str, ...] = ()

    def named(self) -> list[tuple[str, int]]:
        """The numeric limits that are set, by verdict.json name."""
        return [
            (name, value)
            for name, value in (
                ("max_concurrency", self.max_concurrency),
                ("max_context", self.max_context),
            )
            if value is not None
        ]

    def any(self) -> bool:
        return bool(self.named() or self.disable_features)

    def to_json(self) -> dict[str, Any]:
        """verdict.json `limits`: only the limits that are set."""
        return self.model_dump(mode="json", exclude_defaults=True)


class ExercisedEnvelope(_Entry):
    """The envelope the run exercised and saw hold (verdict.json `tested`); None: not tested.
    Every verdict states it, go-live included: running beyond it is outside the verdict."""

    max_concurrency: int | None = None  # the concurrency ramp's highest stable step
    max_context: int | None = None  # the longest input served, in tokens
    sustained_s: float | None = None  # the sustained window that held, in seconds

    @classmethod
    def of(cls, checks: Sequence[CheckResult]) -> ExercisedEnvelope:
        """From the judged checks (re-judged from raw evidence in `golive decide`)."""
        by_id = {c.id: c for c in checks}
        measured = (Status.PASS, Status.WARN, Status.FAIL)
        # the sustained window held only where it passed: a warn there is a limit set because
        # it did not (a drift, failures, a death)
        held = (Status.PASS,)

        def judged(check_id: str, statuses: tuple[Status, ...]) -> Mapping[str, object]:
            """The check's measurements where it judged with one of `statuses`, else {}."""
            check = by_id.get(check_id)
            return {} if check is None or check.status not in statuses else check.measurements

        ceiling = ramp_ceiling(judged("capacity.concurrency", measured))
        context = served_context(judged("capacity.long_input", measured))
        sustained_s = sustained_window(judged("capacity.sustained", held)).duration_s
        return cls(
            max_concurrency=ceiling if ceiling is not None and ceiling > 0 else None,
            max_context=context,
            sustained_s=sustained_s if sustained_s is not None and sustained_s > 0 else None,
        )

    def sentence(self) -> str:
        """One sentence a reviewer reads in the report and on the sign-off sheet."""
        parts = [
            "concurrency "
            + ("not tested" if self.max_concurrency is None else f"up to {self.max_concurrency}"),
            "context "
            + ("not tested" if self.max_context is None else f"up to {self.max_context:,} tokens"),
            "sustained load "
            + ("not tested" if self.sustained_s is None else f"held for {self.sustained_s:g} s"),
        ]
        return (
            "Tested envelope: "
            + "; ".join(parts)
            + ". Beyond it nothing was measured: traffic past it is outside this verdict."
        )


def tested_sentence(tested: ExercisedEnvelope | None) -> str:
    if tested is None:
        return "Tested envelope: not stated (this verdict was written by an older golive)."
    return tested.sentence()


class ActionEntry(_Entry):
    """An open item with its owner, deadline and rollback (verdict.json `actions`)."""

    check: str
    owner: str
    deadline: str
    rollback: str
    status: str | None = None


class SkippedEntry(_Entry):
    check: str
    reason: str


class WaiverEntry(_Entry):
    check: str
    reason: str
    owner: str


class PolicyRef(_Entry):
    name: str
    version: int
    sha256: str


class RollbackTarget(_Entry):
    image: str | None
    image_digest: str | None
    launch_config_digest: str | None
    becomes_rollback_artifact: str


class InterruptionEntry(_Entry):
    signal: str
    at: str
    stopped_in_s: float


class PartEntry(_Entry):
    """A section bundle inside a combined bundle (verdict.json `parts`)."""

    bundle: str
    dir: str
    scope: tuple[str, ...]
    outcome: Outcome | None
    finished_at: str | None
    manifest_sha256: str


# Written only when they apply (an interrupted run, a combined bundle, a run's evidence size).
_WHEN_SET = (
    "interrupted",
    PARTS,
    "bundle_bytes",
    "identity",
    "assumed_same_deployment",
    "tested",
)


class VerdictDocument(_Entry):
    """verdict.json."""

    outcome: Outcome
    exit_code: int | None = None
    scope: str | tuple[str, ...] | None = None  # "programme" or the sections a command ran
    sections_missing: tuple[str, ...] = ()
    profile: str
    target: str | None = None
    command: str | None = None
    started_at: str
    finished_at: str
    golive_version: str
    config_digest: str | None = None
    checks: tuple[CheckEntry, ...]
    rules_fired: tuple[RuleEntry, ...]
    limits: Limits = Limits()
    tested: ExercisedEnvelope | None = None  # older bundles: not stated
    skipped_by_config: tuple[SkippedEntry, ...] = ()
    actions: tuple[ActionEntry, ...] = ()
    rollback_target: RollbackTarget | None = None
    waivers: tuple[WaiverEntry, ...] = ()
    policy: PolicyRef | None = None
    judged_from_evidence: tuple[str, ...] = ()
    interrupted: InterruptionEntry | None = None
    bundle_bytes: int | None = None
    parts: tuple[PartEntry, ...] | None = None
    # the deployment the evidence shows (checks/deployment.py); None in older bundles
    identity: dict[str, Any] | None = None
    assumed_same_deployment: dict[str, Any] | None = None  # combine's override, with reason

    def crashed(self) -> list[str]:
        """The checks that say golive itself stopped on its own error (a section's
        `<section>.programme` or `golive.internal` in `error`)."""
        return [
            c.id
            for c in self.checks
            if c.status is Status.ERROR
            and (c.id == "golive.internal" or c.id.endswith(".programme"))
        ]

    def process_exit_code(self) -> int:
        """The status the command exits with: 128 + the signal after SIGINT or SIGTERM (130,
        143), 3 when golive stopped on its own error, else the outcome's code."""
        if self.interrupted is not None:
            number = getattr(signal.Signals, self.interrupted.signal, None)
            if number is not None:
                return 128 + int(number)
        if self.crashed():
            return EXIT_INTERNAL
        return self.outcome.exit_code

    def results(self) -> list[CheckResult]:
        return [c.result() for c in self.checks]

    def check(self, check_id: str) -> CheckEntry | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def measurements(self, check_id: str) -> dict[str, Measurement]:
        """A check's measurements; {} where the check is not in the verdict."""
        found = self.check(check_id)
        return {} if found is None else found.measurements

    def to_json(self) -> dict[str, Any]:
        """verdict.json's content (the names users' scripts read)."""
        data = self.model_dump(mode="json", by_alias=True)
        data["limits"] = self.limits.to_json()
        for key in _WHEN_SET:
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: object, source: str = VERDICT) -> VerdictDocument:
        """Validate a parsed verdict.json; errors name `source` and the field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _not_a_verdict(source, exc) from exc

    @classmethod
    def read(cls, root: Path) -> VerdictDocument:
        """The bundle's verdict.json, or a ConfigError naming the file and what is wrong."""
        path = root / VERDICT
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror}); is it a bundle?") from exc
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise _not_a_verdict(str(path), exc) from exc


def _not_a_verdict(source: str, exc: ValidationError) -> ConfigError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return ConfigError(
        f"{source}: not a golive verdict: field {where}: {first['msg']} "
        f"({exc.error_count()} problem(s)); was it written by golive and left unedited?"
    )


def rules_of(decision: Decision) -> tuple[RuleEntry, ...]:
    return tuple(
        RuleEntry(rule=r.rule, outcome=r.outcome, reason=r.reason, checks=r.check_ids)
        for r in decision.rules_fired
    )


def timestamp() -> str:
    """Now, as verdict.json and a signature state times: UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
