"""`golive decide BUNDLE`: re-derive the verdict offline from a sealed bundle, with the
policy and profile saved inside it, and say whether it agrees with the sealed one.

Every check a family judge owns (`checks/owners.py`) is judged again from the evidence —
every judge whose evidence is here and every one the bundle's scope calls for, whatever
verdict.json lists (`rejudge.py`); a combined bundle's checks are rebuilt from its parts.
Each difference from the sealed checks is named, and an owned check whose evidence is
missing or unreadable is critical `no_data`. Only checks no judge owns are taken as sealed
(and an accepted bundle may hold none without a reviewer's override: `require_rederived`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from golive.bundle.layout import (
    CAPACITY_REQUEST_JSON,
    MANIFEST,
    PARTS,
    POLICY,
    VERDICT,
)
from golive.bundle.schemas import schema_problems
from golive.bundle.store import BundleReader, verify
from golive.checks.cache.after_load import combined_gap
from golive.checks.capacity.measured import sustained_window
from golive.checks.owners import EVIDENCE_JUDGES, EvidenceJudge, sections_with_evidence
from golive.errors import BundleError, ConfigError
from golive.orchestration.rejudge import bundle_profile, differences, rejudge
from golive.report.capacity_request import capacity_request
from golive.results import CheckResult, Decision, Outcome, RuleFired, Status
from golive.verdict.decide import decide, limits
from golive.verdict.document import ExercisedEnvelope, PartEntry, VerdictDocument
from golive.verdict.policy import (
    Policy,
    apply_policy,
    impersonation,
    parse_policy,
    waivers_for,
)
from golive.verdict.scope import (
    PROGRAMME,
    SECTIONS,
    Scope,
    scope_from_json,
    scope_json,
)

__all__ = [
    "EVIDENCE_JUDGES",
    "EvidenceJudge",
    "Rederived",
    "differences",
    "judged_from_evidence",
    "rederive",
    "require_rederived",
]

# The scope each judging command runs; a bundle's scope is this, widened by the sections
# whose evidence it holds, never what verdict.json says alone.
COMMAND_SCOPE: dict[str, Scope] = {
    "run": PROGRAMME,
    "demo": PROGRAMME,
    **{section: (section,) for section in SECTIONS},
}
COMBINED = "decide --combine"
PER_RUN = ("golive.", "target.")  # checks each run makes of itself: one per part when combined


def judged_from_evidence(root: Path, checks: Sequence[CheckResult]) -> list[str]:
    """The judges that read this bundle for `checks` (verdict.json `judged_from_evidence`, a
    record for the reader: `golive decide` judges whatever the evidence and scope call for)."""
    return [
        j.name for j in EVIDENCE_JUDGES if j.present(root) and any(j.owns(c.id) for c in checks)
    ]


@dataclass(frozen=True, slots=True)
class Rederived:
    sealed: Outcome
    decision: Decision
    problems: tuple[str, ...]
    rejudged: tuple[str, ...] = ()  # EVIDENCE_JUDGES names judged again from the evidence
    as_sealed: tuple[str, ...] = ()  # ids of the checks taken as sealed (no judge owns them)
    rejudged_ids: tuple[str, ...] = ()  # ids of the checks judged again
    checks: tuple[CheckResult, ...] = ()  # the checks as re-derived, policy applied
    scope: Scope = ()  # from the recorded command and the evidence present

    @property
    def agrees(self) -> bool:
        return not self.problems


def rederive(root: Path) -> Rederived:
    """The bundle judged again from its evidence. verdict.json must be readable (there is
    nothing to compare with otherwise: golive's error); damage anywhere else — the config,
    the policy, the profile, an evidence file golive cannot parse — is a named problem and a
    `hold`, never a traceback and never a better outcome."""
    data = VerdictDocument.read(root)
    try:
        return _rederive(root, data)
    except (BundleError, ConfigError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        problem = f"the bundle cannot be judged again: {exc}"
        hold = RuleFired("missing-evidence", Outcome.HOLD, problem, ())
        return Rederived(
            data.outcome,
            Decision(Outcome.HOLD, (hold,)),
            (*_manifest_problems(root), problem),
        )


def _rederive(root: Path, data: VerdictDocument) -> Rederived:
    sealed = data.outcome
    checks = data.results()
    problems = _manifest_problems(root)
    policy_path = root / POLICY
    policy: Policy | None = None
    if policy_path.is_file():
        loaded = parse_policy(policy_path.read_text(encoding="utf-8"), str(policy_path))
        recorded = None if data.policy is None else data.policy.sha256
        if recorded != loaded.sha256:
            problems.append(f"{POLICY} has digest {loaded.sha256}, verdict.json names {recorded}")
        pretends = impersonation(loaded)
        if pretends is not None:
            problems.append(f"{POLICY}: {pretends}")
        policy = loaded.policy
    elif data.policy is not None:
        problems.append(
            f"{POLICY} is missing, but verdict.json says it was judged under the policy "
            f"{data.policy.name!r} (sha256 {data.policy.sha256}): judged without it"
        )
    profile = None if policy is None else bundle_profile(BundleReader(root), data)
    if data.parts is not None or data.command == COMBINED:
        scope, checks, rejudged, owned = _rederive_parts(root, data, problems)
        if policy is not None:
            checks = apply_policy(policy, checks, profile)
        problems.extend(differences(data.results(), checks))
    else:
        scope = bundle_scope(root, data)
        checks, rejudged, owned = rejudge(root, data, checks, policy, problems, scope)
        if policy is not None:
            checks = apply_policy(policy, checks, profile)
    recorded_scope = scope_from_json(data.scope)
    if recorded_scope != scope:
        problems.append(
            f"verdict.json's scope is {scope_json(recorded_scope)!r}, but its command "
            f"({data.command}) and evidence make it {scope_json(scope)!r}"
        )
    decision = decide(checks, scope, waivers_for(policy, checks, profile))
    malformed = schema_problems(root)
    if malformed:  # evidence not of its type was not measured: hold, naming the first
        problems.extend(malformed)
        why = f"evidence does not read as its schema: {malformed[0]}"
        decision = Decision(Outcome.HOLD, (RuleFired("missing-evidence", Outcome.HOLD, why, ()),))
    if decision.outcome is not sealed:
        problems.append(
            f"re-derived outcome {decision.outcome.value} differs from the sealed {sealed.value}"
        )
    problems.extend(_envelope_differences(data, checks))
    problems.extend(request_differences(root, decision.outcome, checks))
    sealed_rules = [r.rule for r in data.rules_fired]
    derived_rules = [r.rule for r in decision.rules_fired]
    if sealed_rules != derived_rules:
        problems.append(f"rules fired differ: sealed {sealed_rules}, re-derived {derived_rules}")
    kept = [c.id for c in checks if c.id not in owned]
    return Rederived(
        sealed,
        decision,
        tuple(problems),
        tuple(rejudged),
        tuple(kept),
        tuple(sorted(owned)),
        tuple(checks),
        scope,
    )


def _envelope_differences(data: VerdictDocument, checks: Sequence[CheckResult]) -> list[str]:
    """verdict.json's `limits` and `tested` are what the re-judged checks give: guardrails,
    watch and the sign-off sheet read them, so an edited envelope is caught like an edited
    outcome."""
    found = []
    derived = limits(checks)
    if data.limits != derived:
        found.append(
            f"verdict.json's limits {data.limits.to_json()} differ from the evidence's "
            f"{derived.to_json()}"
        )
    tested = ExercisedEnvelope.of(checks)
    if data.tested is not None and data.tested != _as_stated_before(data.tested, tested, checks):
        found.append(
            f"verdict.json's tested envelope {data.tested.model_dump(mode='json')} differs "
            f"from the evidence's {tested.model_dump(mode='json')}"
        )
    return found


def _as_stated_before(
    stated: ExercisedEnvelope, derived: ExercisedEnvelope, checks: Sequence[CheckResult]
) -> ExercisedEnvelope:
    """The evidence's envelope as golive before 2026-12 stated it, where the bundle says so:
    it counted a sustained window that warned (a limit set) as held for its seconds."""
    sustained = next((c for c in checks if c.id == "capacity.sustained"), None)
    if (
        sustained is None
        or sustained.status is not Status.WARN
        or derived.sustained_s is not None
        or stated.sustained_s != sustained_window(sustained.measurements).duration_s
    ):
        return derived
    return derived.model_copy(update={"sustained_s": stated.sustained_s})


def request_differences(root: Path, outcome: Outcome, checks: Sequence[CheckResult]) -> list[str]:
    """capacity-request.json is what the evidence gives (a team buys GPUs from it)."""
    reader = BundleReader(root)
    derived = capacity_request(reader, outcome, checks)
    path = root / CAPACITY_REQUEST_JSON  # this bundle's own, not a part's
    try:
        stored = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return [f"{CAPACITY_REQUEST_JSON} cannot be read as JSON"]
    if derived is None and stored is None:
        return []
    if derived is None:
        return [f"{CAPACITY_REQUEST_JSON} is present, but the evidence gives no expand-capacity"]
    if stored is None:
        return [f"{CAPACITY_REQUEST_JSON} is missing: an expand-capacity verdict carries one"]
    if stored != json.loads(json.dumps(derived)):
        return [f"{CAPACITY_REQUEST_JSON} is not the capacity request the evidence gives"]
    return []


def bundle_scope(root: Path, data: VerdictDocument) -> Scope:
    """What a (non-combined) bundle covers: its recorded command's scope, widened by every
    section whose evidence it holds. verdict.json's `scope` is used only for a command golive
    does not know (then widened the same way)."""
    base = COMMAND_SCOPE.get(data.command or "")
    if base is None:
        base = scope_from_json(data.scope)
    if base == PROGRAMME:
        return PROGRAMME
    ran = set(base) | sections_with_evidence(root)
    return tuple(s for s in SECTIONS if s in ran)


def as_part_checks(checks: Sequence[CheckResult], name: str) -> list[CheckResult]:
    """A part's checks as a combined bundle holds them: evidence paths inside the combined
    bundle; the per-run checks (ledger, interrupts, the answering model) keep the part's name
    so none is lost."""
    out = []
    for check in checks:
        evidence = tuple(f"{PARTS}/{name}/{e}" for e in check.evidence)
        check_id = f"{check.id}@{name}" if check.id.startswith(PER_RUN) else check.id
        out.append(dataclasses.replace(check, id=check_id, evidence=evidence))
    return out


def _rederive_parts(
    root: Path, data: VerdictDocument, problems: list[str]
) -> tuple[Scope, list[CheckResult], list[str], set[str]]:
    """A combined bundle: every part re-derived, and the combined checks rebuilt from the
    parts' re-derived checks (the top-level list is never kept)."""
    parts: Sequence[PartEntry] = data.parts or ()
    listed = {Path(p.dir).name for p in parts}
    folder = root / PARTS
    on_disk = {p.name for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else set()
    for name in sorted(on_disk - listed):
        problems.append(f"{PARTS}/{name} is in the bundle but not among verdict.json's parts")
    rejudged: set[str] = set()
    owned: set[str] = set()
    checks: list[CheckResult] = []
    covered: set[str] = set()
    held = []
    for part in parts:
        where = root / part.dir
        if Path(part.dir).parts != (PARTS, Path(part.dir).name) or part.dir.endswith("/."):
            problems.append(f"{part.dir}: a part lives in {PARTS}/<name> inside the bundle")
            continue
        if not (where / VERDICT).is_file():
            problems.append(f"{part.dir}: the part is missing from the bundle")
            continue
        again = rederive(where)
        name = where.name
        problems.extend(f"{part.dir}: {problem}" for problem in again.problems)
        held.append((where, again))
        digest = "sha256:" + hashlib.sha256((where / MANIFEST).read_bytes()).hexdigest()
        if digest != part.manifest_sha256:
            problems.append(f"{part.dir}: its manifest is not the one verdict.json cites")
        rejudged.update(again.rejudged)
        mapped = as_part_checks(again.checks, name)
        kept = set(again.as_sealed)
        owned.update(c.id for c, o in zip(mapped, again.checks, strict=True) if o.id not in kept)
        checks += mapped
        covered |= set(SECTIONS) if again.scope == PROGRAMME else set(again.scope)
    scope: Scope = (
        PROGRAMME if covered >= set(SECTIONS) else tuple(s for s in SECTIONS if s in covered)
    )
    if not parts:
        problems.append("a combined bundle without parts: nothing to re-derive")
    problems.extend(_one_deployment(held, data))
    gap = combined_gap([where for where, _ in held], checks, scope == PROGRAMME)
    checks += gap
    owned.update(c.id for c in gap)
    return scope, checks, sorted(rejudged), owned


def _one_deployment(held: Sequence[tuple[Path, Rederived]], data: VerdictDocument) -> list[str]:
    """The combination's refusals asked again of the parts as they are now: one deployment
    (unless the assumption recorded), each section once."""
    from golive.orchestration.combine import Part, deployment_facts, refusals

    parts = [
        Part(
            where,
            VerdictDocument.read(where),
            tuple(SECTIONS) if again.scope == PROGRAMME else tuple(again.scope),
            "",
            dt.datetime.fromisoformat(data.started_at),
            deployment_facts(where, VerdictDocument.read(where)),
        )
        for where, again in held
    ]
    now = dt.datetime.fromisoformat(data.started_at)
    assumed = data.assumed_same_deployment is not None
    return refusals(parts, now, math.inf, assume_same=assumed)


def _manifest_problems(root: Path) -> list[str]:
    links = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink()]
    if links:  # what a link points to is outside the manifest's reach
        return [f"symbolic links in the bundle (golive writes plain files only): {links[:5]}"]
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


def require_rederived(root: Path, use: str, override_reason: str | None = None) -> Rederived:
    """A bundle that may be accepted (signed, registered, watched, turned into guardrails):
    `golive decide` agrees with its sealed verdict, and no check is taken on the bundle's
    own word, unless a reviewer's `override_reason` accepts the checks no judge owns."""
    again = rederive(root)
    if not again.agrees:
        shown = "; ".join(again.problems[:6])
        more = f" (and {len(again.problems) - 6} more)" if len(again.problems) > 6 else ""
        raise ConfigError(
            f"{root}: {use} refused: golive decide does not re-derive the sealed verdict "
            f"({shown}{more}); run golive decide {root} for the whole list"
        )
    if again.as_sealed and not (override_reason and override_reason.strip()):
        raise ConfigError(
            f"{root}: {use} refused: {len(again.as_sealed)} check(s) would be taken on the "
            f"bundle's own word, since no judge re-derives them from evidence "
            f"({', '.join(again.as_sealed)}); a reviewer who accepts them gives "
            "--override-reason TEXT, recorded with the signature"
        )
    return again
