"""`golive decide BUNDLE`: re-derive the verdict offline from a sealed bundle, with the
policy and profile saved inside it, and say whether it agrees with the sealed one.

Checks that are judged from the bundle (`EVIDENCE_JUDGES`) are judged again from their
evidence, with the server-log corroboration and the policy applied as in the run; every
re-judged check must equal the sealed one in status, summary and measurements, and each
difference is named. The other checks are taken as sealed (the decision table is
still re-applied to them). An edited evidence file is caught even when the manifest was
recomputed: the check judged from it differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.bundle.layout import (
    AGENT_PLAN,
    CACHE_PROTOCOL,
    CAPACITY_LADDER,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_WATCHDOG,
    CHAIN_INPUTS,
    EFFECTIVE_CONFIG,
    LEDGER_SENT,
    POLICY,
    PROFILE,
    SERVER_LOG,
    SMOKE_PLAN,
    STARTUP_LOG,
)
from golive.bundle.store import ZSTD, BundleReader, locate, verify
from golive.checks.agent.judge import judge_agent
from golive.checks.cache import judge_cache
from golive.checks.capacity.answer_probes import CHECK as ANSWERS_CHECK
from golive.checks.capacity.answer_probes import EVIDENCE as ANSWERS_EVIDENCE
from golive.checks.capacity.answer_probes import judge_answers
from golive.checks.capacity.judge import (
    judge_headroom,
    judge_long_input,
    judge_model_load,
    judge_ramp,
    judge_sustained,
)
from golive.checks.env.judge import CHAIN_CHECKS, judge_chain
from golive.checks.smoke.judge import CHECKS as SMOKE_CHECKS
from golive.checks.smoke.judge import judge_smoke
from golive.checks.smoke.request_classes import SUSTAINED_STREAM as SMOKE_SUSTAINED
from golive.checks.smoke.request_classes import judge_sessions, judge_short_sustained
from golive.checks.smoke.request_classes_judge import CHECKS as CLASS_CHECKS
from golive.checks.smoke.request_classes_judge import FILE as CLASSES_FILE
from golive.checks.smoke.request_classes_judge import judge_saved_classes
from golive.config import GoliveConfig, Profile, load_profile, parse_config, parse_profile
from golive.evidence.runtime_log import corroborate, request_spans, runtime_errors
from golive.results import CheckResult, Decision, Outcome
from golive.verdict.decide import decide
from golive.verdict.document import PartEntry, VerdictDocument
from golive.verdict.ledger import CHECK_ID as LEDGER_CHECK
from golive.verdict.ledger import judge_ledger
from golive.verdict.policy import Policy, apply_policy, parse_policy
from golive.verdict.scope import scope_from_json


@dataclass(frozen=True, slots=True)
class Saved:
    """What a judge reads besides the evidence: the profile and effective config the run
    applied (the bundle's own copies)."""

    profile: Profile
    config: GoliveConfig


@dataclass(frozen=True, slots=True)
class EvidenceJudge:
    """Checks judged from the bundle: which (ids; one ending in '.' is a whole family), the
    file their collector always writes, and the judge."""

    name: str
    checks: tuple[str, ...]
    marker: str
    judge: Callable[[BundleReader, Saved], list[CheckResult]]

    def owns(self, check_id: str) -> bool:
        return any(
            check_id.startswith(c) if c.endswith(".") else check_id == c for c in self.checks
        )


EVIDENCE_JUDGES = (
    EvidenceJudge("agent", ("agent.",), AGENT_PLAN, lambda r, s: judge_agent(r, s.profile).results),
    EvidenceJudge("cache", ("cache.",), CACHE_PROTOCOL, lambda r, s: judge_cache(r, s.profile)),
    EvidenceJudge(
        "environment.chain",
        CHAIN_CHECKS,
        CHAIN_INPUTS,
        lambda r, s: judge_chain(r, s.profile, s.config),
    ),
    EvidenceJudge(
        "capacity.model_load",
        ("capacity.model_load",),
        STARTUP_LOG,
        lambda r, s: [judge_model_load(r)],
    ),
    EvidenceJudge(
        "capacity.long_input",
        ("capacity.long_input",),
        CAPACITY_LADDER,
        lambda r, s: [judge_long_input(r)],
    ),
    EvidenceJudge(
        "capacity.concurrency",
        ("capacity.concurrency",),
        CAPACITY_STEPS,
        lambda r, s: [judge_ramp(r, s.config.capacity)],
    ),
    EvidenceJudge(
        "capacity.sustained",
        ("capacity.sustained",),
        CAPACITY_SUSTAINED,
        lambda r, s: [judge_sustained(r, s.config.capacity)],
    ),
    EvidenceJudge(
        "capacity.answers_under_load",
        (ANSWERS_CHECK,),
        ANSWERS_EVIDENCE,
        lambda r, s: judge_answers(r, s.profile.capacity.answers_under_load_critical),
    ),
    EvidenceJudge(
        "smoke",
        SMOKE_CHECKS,
        SMOKE_PLAN,
        lambda r, s: judge_smoke(r, s.config),
    ),
    EvidenceJudge(
        "smoke.classes",
        CLASS_CHECKS,
        SMOKE_PLAN,  # the classes run after the basics, whose answers size them
        lambda r, s: judge_saved_classes(r, s.config),
    ),
    EvidenceJudge(
        "smoke.concurrent_sessions",
        ("smoke.concurrent_sessions",),
        f"requests/{CLASSES_FILE}.jsonl",
        lambda r, s: [judge_sessions(r, s.config)],
    ),
    EvidenceJudge(
        "smoke.sustained",
        ("smoke.sustained",),
        SMOKE_SUSTAINED,
        lambda r, s: [judge_short_sustained(r, s.config)],
    ),
    EvidenceJudge("golive.ledger", (LEDGER_CHECK,), LEDGER_SENT, lambda r, s: [judge_ledger(r)]),
    EvidenceJudge(
        "golive.client_headroom",
        ("golive.client_headroom",),
        CAPACITY_WATCHDOG,
        lambda r, s: [judge_headroom(r)],
    ),
)


def judged_from_evidence(root: Path, checks: Sequence[CheckResult]) -> list[str]:
    """The judges that read this bundle for `checks` (verdict.json `judged_from_evidence`):
    their evidence file is here and they own at least one check. `golive decide` must judge
    them again, and one that is listed but no longer present is a difference."""
    return [
        j.name
        for j in EVIDENCE_JUDGES
        if (locate(root, j.marker).is_file() or locate(root, j.marker + ZSTD).is_file())
        and any(j.owns(c.id) for c in checks)
    ]


@dataclass(frozen=True, slots=True)
class Rederived:
    sealed: Outcome
    decision: Decision
    problems: tuple[str, ...]
    rejudged: tuple[str, ...] = ()  # EVIDENCE_JUDGES names judged again from the evidence
    as_sealed: tuple[str, ...] = ()  # ids of the checks taken as sealed
    rejudged_ids: tuple[str, ...] = ()  # ids of the checks judged again

    @property
    def agrees(self) -> bool:
        return not self.problems


def rederive(root: Path) -> Rederived:
    data = VerdictDocument.read(root)
    sealed = data.outcome
    checks = data.results()
    scope = scope_from_json(data.scope)
    problems = _manifest_problems(root)
    policy_path = root / POLICY
    policy: Policy | None = None
    if policy_path.is_file():
        loaded = parse_policy(policy_path.read_text(encoding="utf-8"), str(policy_path))
        recorded = None if data.policy is None else data.policy.sha256
        if recorded != loaded.sha256:
            problems.append(f"{POLICY} has digest {loaded.sha256}, verdict.json names {recorded}")
        policy = loaded.policy
    if data.parts:  # a combined bundle: each part is re-derived as it was sealed
        rejudged, owned = _rederive_parts(root, data.parts, problems)
    else:
        checks, rejudged, owned = _rejudge(root, data, checks, policy, problems)
    if policy is not None:
        checks = apply_policy(policy, checks)
    decision = decide(checks, scope, dict(policy.waive) if policy is not None else {})
    if decision.outcome is not sealed:
        problems.append(
            f"re-derived outcome {decision.outcome.value} differs from the sealed {sealed.value}"
        )
    sealed_rules = [r.rule for r in data.rules_fired]
    derived_rules = [r.rule for r in decision.rules_fired]
    if sealed_rules != derived_rules:
        problems.append(f"rules fired differ: sealed {sealed_rules}, re-derived {derived_rules}")
    kept = [c.id for c in checks if c.id not in owned]
    return Rederived(
        sealed, decision, tuple(problems), tuple(rejudged), tuple(kept), tuple(sorted(owned))
    )


def _rederive_parts(
    root: Path, parts: Sequence[PartEntry], problems: list[str]
) -> tuple[list[str], set[str]]:
    rejudged: set[str] = set()
    owned: set[str] = set()
    for part in parts:
        where = part.dir
        again = rederive(root / where)
        problems.extend(f"{where}: {problem}" for problem in again.problems)
        rejudged.update(again.rejudged)
        owned.update(again.rejudged_ids)
    return sorted(rejudged), owned


def _manifest_problems(root: Path) -> list[str]:
    report = verify(root)
    if report.ok:
        return []
    changed = [
        f"{what}: {', '.join(paths)}"
        for what, paths in (
            ("altered", report.altered),
            ("missing", report.missing),
            ("added", report.extra),
        )
        if paths
    ]
    return [f"the bundle does not match its manifest ({'; '.join(changed)})"]


def _rejudge(
    root: Path,
    data: VerdictDocument,
    checks: list[CheckResult],
    policy: Policy | None,
    problems: list[str],
) -> tuple[list[CheckResult], list[str], set[str]]:
    """The sealed checks with every judge that reads the bundle run again; differences go to
    `problems`. Also: the judges that ran, and the ids of the checks they own."""
    listed = set(data.judged_from_evidence)
    present = set(judged_from_evidence(root, checks))
    reader = BundleReader(root)
    saved = Saved(_profile(reader, data), _config(reader))
    errors = _logged_errors(reader, data)
    rejudged: list[str] = []
    owned: set[str] = set()
    for judge in EVIDENCE_JUDGES:
        if judge.name in listed and judge.name not in present:
            problems.append(
                f"{judge.name} was judged from {judge.marker}: the file or its checks are no "
                "longer in the bundle"
            )
            continue
        if judge.name not in present:
            continue
        mine = [c for c in checks if judge.owns(c.id)]
        again = judge.judge(reader, saved)
        if errors:
            again, _ = corroborate(again, errors, request_spans(root))
        if policy is not None:
            again = apply_policy(policy, again)
            mine = apply_policy(policy, mine)
        problems.extend(differences(mine, again))
        by_id = {c.id: c for c in again}
        checks = [by_id.pop(c.id, c) if judge.owns(c.id) else c for c in checks]
        checks += list(by_id.values())
        rejudged.append(judge.name)
        owned.update(c.id for c in checks if judge.owns(c.id))
    return checks, rejudged, owned


def _config(reader: BundleReader) -> GoliveConfig:
    text = reader.text(EFFECTIVE_CONFIG)
    if text is None:
        return GoliveConfig()
    return parse_config(text, str(reader.root / EFFECTIVE_CONFIG))


def _profile(reader: BundleReader, data: VerdictDocument) -> Profile:
    text = reader.text(PROFILE)
    if text is not None:
        return parse_profile(text, str(reader.root / PROFILE))
    return load_profile(data.profile or "generic")


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
        for key in sorted({*old.measurements, *new.measurements}):
            a, b = old.measurements.get(key, "absent"), new.measurements.get(key, "absent")
            if a != b:
                out.append(f"{check_id} measurements.{key}: sealed {a!r}, re-derived {b!r}")
    return out


def _short(value: Any) -> str:
    text = getattr(value, "value", value)
    text = str(text)
    return repr(text if len(text) <= 160 else text[:157] + "...")
