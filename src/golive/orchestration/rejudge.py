"""Judging a (non-combined) bundle's checks again: every family judge its evidence or its
scope calls for (`checks/owners.py`), whatever verdict.json lists, and what the bundle's own
word may not decide (section results, golive's stops, the config and profile it names).
The differences go into `problems`; `rederive.py` decides on the checks this returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import EFFECTIVE_CONFIG, PARTS, PROFILE, SERVER_LOG
from golive.bundle.store import BundleReader
from golive.checks.deployment import deployment_of
from golive.checks.owners import EVIDENCE_JUDGES, EvidenceJudge, Saved, sections_with_evidence
from golive.config import GoliveConfig, config_digest, parse_config
from golive.evidence.runtime_log import (
    Attributed,
    attribute,
    request_spans,
    runtime_errors,
    with_logged_errors,
)
from golive.profiles import PROFILES, Profile, load_profile, parse_profile, profile_text
from golive.programme_config import ProgrammeConfig
from golive.results import CheckClass, CheckLimits, CheckResult, ResultsOf, Status
from golive.verdict.document import VerdictDocument
from golive.verdict.policy import Policy, apply_policy
from golive.verdict.recorded import recorded_measurements
from golive.verdict.scope import PROGRAMME, SECTIONS, Scope, skipped_by_config

_SECTION_CLASS = {
    "env": CheckClass.ENVIRONMENT,
    "smoke": CheckClass.SMOKE,
    "capacity": CheckClass.CAPACITY,
    "cache": CheckClass.CACHE,
    "agent": CheckClass.AGENT,
}
SECTION_RESULT = ".programme"  # `<section>.programme`: why a section did not run
# A run that stopped early: hold whatever else the bundle holds.
HALTED = ("golive.internal", "golive.interrupted")


def rejudge(
    root: Path,
    data: VerdictDocument,
    checks: list[CheckResult],
    policy: Policy | None,
    problems: list[str],
    scope: Scope,
) -> tuple[list[CheckResult], list[str], set[str]]:
    """The sealed checks with every judge that reads the bundle, or that its scope calls for,
    run again; differences go to `problems`. Also: the judges that ran, and the ids of the
    checks they own."""
    reader = BundleReader(root)
    saved = Saved(bundle_profile(reader, data), _config(reader))
    problems.extend(_setup_problems(reader, data, saved))
    errors = _logged_errors(reader, data)
    # the errors placed among the requests in flight once, when the first judge's checks
    # need them (where no judge runs, the record streams are not read for them)
    attributed: list[Attributed] | None = None
    in_scope = set(SECTIONS) if scope == PROGRAMME else set(scope)
    # A section that did not run (its `.programme` result) left no evidence; one whose
    # evidence is here ran, whatever a section result claims.
    ran_anyway = sections_with_evidence(root, always=False)
    stopped = {
        section
        for c in checks
        if c.id.endswith(SECTION_RESULT)
        and (
            (section := c.id.removesuffix(SECTION_RESULT)) not in ran_anyway
            or c.status is Status.ERROR
        )
    }
    # A run that stopped early (a crash, a signal) is hold whatever else it holds, and its
    # collectors did not judge all they wrote: only the checks it lists are judged again.
    halted = any(c.id in HALTED and _as_produced(c) for c in checks)
    rejudged: list[str] = []
    owned: set[str] = {c.id for c in checks if c.id.endswith(SECTION_RESULT) or c.id in HALTED}
    wrong = _section_results(checks, ran_anyway)
    problems.extend(wrong)
    if wrong:  # a record golive would not write decides nothing: it is unmeasured
        bad = {w.split(":", 1)[0] for w in wrong}
        checks = [_unproduced(c) if c.id in bad else c for c in checks]
    if (root / PARTS).exists():
        problems.append(f"{PARTS}/ in a bundle that is not combined: evidence there is not its")
    for judge in EVIDENCE_JUDGES:
        mine = [c for c in checks if judge.owns(c.id)]
        ran = not halted and (
            judge.section is None or (judge.section in in_scope and judge.section not in stopped)
        )
        if judge.present(root):
            if not mine and not ran:  # another section's file (a startup log for env)
                continue
            again = _judged(judge, reader, saved, mine, problems)
        else:
            expected = (judge.always and ran) or (not halted and judge.expected_by(root))
            if not mine and not expected:
                continue
            again = _without_evidence(judge, reader, saved, mine, problems)
        if errors:
            if attributed is None:
                attributed = attribute(errors, request_spans(root))
            again = with_logged_errors(again, attributed)
        if policy is not None:
            again = apply_policy(policy, again, saved.profile)
            mine = apply_policy(policy, mine, saved.profile)
        problems.extend(differences(mine, again))
        by_id = {c.id: c for c in again}
        checks = [by_id.pop(c.id, _unproduced(c)) if judge.owns(c.id) else c for c in checks]
        checks += list(by_id.values())
        rejudged.append(judge.name)
        owned.update(c.id for c in checks if judge.owns(c.id))
    return checks, rejudged, owned


def _judged(
    judge: EvidenceJudge,
    reader: BundleReader,
    saved: Saved,
    mine: Sequence[CheckResult],
    problems: list[str],
) -> list[CheckResult]:
    """The judge's results, or, where its evidence cannot be read, each of its checks
    `no_data` naming the file (never a traceback)."""
    try:
        return judge.judge(reader, saved)
    except Exception as exc:  # evidence in any shape: whatever a judge trips on is unreadable
        why = f"{type(exc).__name__}: {exc}"
        problems.append(f"{judge.name}: its evidence cannot be read ({why})")
        return _unjudgeable(judge, mine, f"unreadable evidence ({judge.marker}: {why})")


def _without_evidence(
    judge: EvidenceJudge,
    reader: BundleReader,
    saved: Saved,
    mine: Sequence[CheckResult],
    problems: list[str],
) -> list[CheckResult]:
    """A judge whose evidence file is not in the bundle. The judge says what that means where
    it can (a capacity run without a startup log: model load unknown); critical failures stay
    (a phase that never ran, since the engine died before it, has no file); anything else
    cannot have been measured and is critical `no_data`."""
    if mine:
        try:
            again = judge.judge(reader, saved)
        except Exception:
            again = None
        if again is not None and not differences(mine, again):
            return again
    held = [c for c in mine if c.critical and c.status in (Status.FAIL, Status.ERROR)]
    if len(held) == len(mine) and mine:
        return list(mine)
    problems.append(
        f"{judge.name}: {judge.marker} is missing from the bundle, so "
        f"{', '.join(c.id for c in mine) or judge.placeholder_id} cannot have been measured"
    )
    return _unjudgeable(judge, mine, f"no evidence: {judge.marker} is missing from the bundle")


def _unjudgeable(judge: EvidenceJudge, mine: Sequence[CheckResult], why: str) -> list[CheckResult]:
    """Each owned check (or one placeholder) as critical `no_data` saying why; critical
    failures are kept, since missing evidence never makes a check better."""
    if not mine:
        check_class = _SECTION_CLASS.get(judge.section or "", CheckClass.INTEGRITY)
        return [
            ResultsOf(check_class)(
                judge.placeholder_id, Status.NO_DATA, why, evidence=(judge.marker,)
            )
        ]
    return [
        c if c.critical and c.status in (Status.FAIL, Status.ERROR) else _wiped(c, why)
        for c in mine
    ]


def _unproduced(check: CheckResult) -> CheckResult:
    """A sealed check its judge does not give from this evidence: never kept as it was (a
    critical failure stays, since missing evidence never makes a check better)."""
    if check.critical and check.status in (Status.FAIL, Status.ERROR):
        return check
    return _wiped(check, "its judge does not give this check from the bundle's evidence")


def _wiped(check: CheckResult, why: str) -> CheckResult:
    """A sealed check whose evidence gives nothing: critical `no_data` keeping nothing the
    bundle said of it, neither its figures nor its classification, limits or skip reason
    (a sealed `expand-capacity` or limit on a check with no data would reach the decision)."""
    return dataclasses.replace(
        check,
        critical=True,
        status=Status.NO_DATA,
        summary=why,
        measurements={},
        classification=None,
        limits=CheckLimits(),
        skip_reason=None,
    )


def _as_produced(check: CheckResult) -> bool:
    """golive.internal and golive.interrupted are only ever critical errors."""
    return check.critical and check.status is Status.ERROR


def _section_results(checks: Sequence[CheckResult], ran: set[str]) -> list[str]:
    """A section's own result (`<section>.programme`) only says why a section did not run
    (skipped, never "not used") or crashed (error); golive's own stops are critical errors.
    Anything else is not golive's."""
    out = []
    for c in checks:
        if c.id in HALTED and not _as_produced(c):
            out.append(f"{c.id}: golive writes it only as a critical error, not {c.status.value}")
        if not c.id.endswith(SECTION_RESULT):
            continue
        section = c.id.removesuffix(SECTION_RESULT)
        if c.status not in (Status.SKIPPED, Status.ERROR):
            out.append(f"{c.id}: a section result is skipped or error, never {c.status.value}")
        elif skipped_by_config(c):
            out.append(f"{c.id}: a section is never skipped as not used")
        elif c.status is Status.SKIPPED and section in ran:
            out.append(f"{c.id}: says the section did not run, but its evidence is here")
        elif c.status is Status.ERROR and not c.critical:
            out.append(f"{c.id}: a crashed section is a critical error")
    return out


def _setup_problems(reader: BundleReader, data: VerdictDocument, saved: Saved) -> list[str]:
    """The config and profile the judges read are the ones the run recorded."""
    out = []
    text = reader.text(EFFECTIVE_CONFIG)
    if text is None:
        out.append(f"{EFFECTIVE_CONFIG} is missing: judged with golive's defaults instead")
    elif data.config_digest is not None:
        written = yaml.safe_load(text)
        if not isinstance(written, dict) or config_digest(written) != data.config_digest:
            out.append(f"{EFFECTIVE_CONFIG} is not the config verdict.json's config_digest names")
    if data.identity is not None:
        seen = deployment_of(reader, saved.config.target.model).to_json()
        changed = sorted(k for k in {*seen, *data.identity} if seen.get(k) != data.identity.get(k))
        if changed:
            out.append(f"verdict.json's identity differs from the evidence in {', '.join(changed)}")
    edited = _edited_profile(reader)
    if edited is not None:
        out.append(edited)
    if saved.profile.name != data.profile:
        out.append(
            f"{PROFILE} is the {saved.profile.name!r} profile, verdict.json names {data.profile!r}"
        )
    return out


def _config(reader: BundleReader) -> GoliveConfig:
    text = reader.text(EFFECTIVE_CONFIG)
    if text is None:  # judged with a new run's defaults (the missing file is a problem)
        return GoliveConfig(programme=ProgrammeConfig())
    saved = yaml.safe_load(text)
    agent = saved.get("agent") if isinstance(saved, dict) else None
    if isinstance(agent, dict) and isinstance(agent.get("repeated_failures"), int):
        # sealed before "repeated" meant at most twice: judged with twice (stricter)
        agent["repeated_failures"] = min(agent["repeated_failures"], 2)
        text = yaml.safe_dump(saved, sort_keys=False)
    config = parse_config(text, str(reader.root / EFFECTIVE_CONFIG))
    # Every rule of this golive applies, whatever keys the saved config names: a key left out
    # (by a bundle sealed before its rule, or by a hand that removed it) takes today's default,
    # so a bundle cannot be judged by an older, weaker rule on its own say-so.
    if config.programme is None:
        config = config.model_copy(update={"programme": ProgrammeConfig()})
    return config


def bundle_profile(reader: BundleReader, data: VerdictDocument) -> Profile:
    """The profile the bundle keeps (config/profile.yaml), else the one verdict.json names. A
    copy naming a bundled profile is judged as the bundled one, whatever its text says
    (`_setup_problems` names an edited copy)."""
    text = reader.text(PROFILE)
    if text is None:
        return load_profile(data.profile or "generic")
    profile = parse_profile(text, str(reader.root / PROFILE))
    return load_profile(profile.name) if profile.name in PROFILES else profile


def _edited_profile(reader: BundleReader) -> str | None:
    text = reader.text(PROFILE)
    if text is None:
        return None
    name = parse_profile(text, str(reader.root / PROFILE)).name
    if name in PROFILES and text != profile_text(name):
        return f"{PROFILE} names the bundled {name!r} profile but differs from it: judged as it"
    return None


def _logged_errors(reader: BundleReader, data: VerdictDocument) -> list[Any]:
    """The errors of the server log the run kept, read as the run read them."""
    text = reader.text(SERVER_LOG)
    if text is None:
        return []
    started = data.started_at
    year = int(started[:4]) if started[:4].isdigit() else 1970
    return list(runtime_errors(text, year, None))


def differences(sealed: Sequence[CheckResult], again: Sequence[CheckResult]) -> list[str]:
    """Each way the re-judged checks differ from the sealed ones: check id, field, sealed
    value, re-derived value."""
    out: list[str] = []
    then = {c.id: c for c in sealed}
    now = {c.id: c for c in again}
    for check_id in [*then, *(i for i in now if i not in then)]:
        old, new = then.get(check_id), now.get(check_id)
        if old is None or new is None:
            out.append(
                f"{check_id}: {'sealed' if new is None else 're-derived'} only "
                f"({(old or new).status.value})"  # type: ignore[union-attr]
            )
            continue
        for field in ("status", "critical", "summary"):
            a, b = getattr(old, field), getattr(new, field)
            if a != b:
                out.append(f"{check_id} {field}: sealed {_short(a)}, re-derived {_short(b)}")
        # as verdict.json records them: the classification and limits among the measurements
        was, now_is = recorded_measurements(old), recorded_measurements(new)
        for key in sorted({*was, *now_is}):
            a, b = was.get(key, "absent"), now_is.get(key, "absent")
            if a != b:
                out.append(f"{check_id} measurements.{key}: sealed {a!r}, re-derived {b!r}")
    return out


def _short(value: Any) -> str:
    text = getattr(value, "value", value)
    text = str(text)
    return repr(text if len(text) <= 160 else text[:157] + "...")
