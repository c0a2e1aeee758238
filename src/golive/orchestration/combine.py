"""`golive decide --combine B1 B2 ...`: one programme decision from sealed section bundles
of one deployment — the second way to reach go-live, beside `golive run`.

Each part is verified (manifest) and re-derived (its sealed verdict must agree) first. Parts
that describe different deployments (image digest, vLLM version, served model, launch
config digest, target URL, profile) or are older than the allowed age are refused, naming
the difference. The combined bundle holds every part under `parts/<sections>/` (each with
its own manifest, cited by digest in verdict.json) and is decided by the same rules.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import EFFECTIVE_CONFIG, MANIFEST, PARTS, POLICY
from golive.bundle.store import Bundle, BundleReader
from golive.checks.cache.after_load import combined_gap
from golive.checks.deployment import FIELDS, deployment_of
from golive.config import GoliveConfig
from golive.errors import BundleError, ConfigError
from golive.operate.rollback import identity
from golive.orchestration.pipeline import Verdict, rollback_target, verdict_document, write_verdict
from golive.orchestration.rederive import as_part_checks, rederive
from golive.profiles import load_profile
from golive.results import CheckResult
from golive.verdict.decide import decide
from golive.verdict.document import PartEntry, VerdictDocument
from golive.verdict.policy import apply_policy, load_policy, refuse_lowering, waivers_for
from golive.verdict.scope import PROGRAMME, SECTIONS, Scope, scope_from_json

DEFAULT_MAX_AGE_DAYS = 7.0
# What tells two deployments apart where both parts know it (a value unknown in one part is
# not compared: the image is known only where container facts were given).
# The launch arguments are known only where a startup log was given (--log).
SETUP_KEYS = ("target", "profile", "image_digest", "launch_args_digest")
# The deployment every section asks of itself (checks/deployment.py): a value known in one
# part and unknown in another is refused too, unless --assume-same-deployment.
IDENTITY_KEYS = tuple(f for f in FIELDS if f not in SETUP_KEYS)


@dataclass(frozen=True, slots=True)
class Part:
    root: Path
    verdict: VerdictDocument
    sections: tuple[str, ...]
    manifest_sha256: str
    finished_at: dt.datetime
    deployment: Mapping[str, Any]

    @property
    def name(self) -> str:
        return "-".join(self.sections)


def read_part(root: Path) -> Part:
    """A sealed, intact section bundle whose verdict re-derives as sealed."""
    try:
        again = rederive(root)  # checks the manifest too: an altered part does not agree
    except BundleError as exc:
        raise ConfigError(f"{root}: {exc}") from exc
    if not again.agrees:
        shown = "; ".join(again.problems[:6])
        more = f"; and {len(again.problems) - 6} more" if len(again.problems) > 6 else ""
        raise ConfigError(
            f"{root}: its verdict does not re-derive ({shown}{more}); golive decide {root} "
            "lists every difference"
        )
    verdict = VerdictDocument.read(root)
    scope = scope_from_json(verdict.scope)
    if scope == PROGRAMME or not scope:
        raise ConfigError(
            f"{root} is not a section bundle (scope {verdict.scope!r}): combine the "
            "bundles of golive env, smoke, capacity, cache and agent"
        )
    try:
        finished = dt.datetime.fromisoformat(verdict.finished_at)
    except ValueError as exc:
        raise ConfigError(f"{root}/verdict.json: no readable finished_at ({exc})") from exc
    manifest = (root / MANIFEST).read_bytes()
    return Part(
        root,
        verdict,
        tuple(scope),
        "sha256:" + hashlib.sha256(manifest).hexdigest(),
        finished,
        deployment_facts(root, verdict),
    )


def deployment_facts(root: Path, verdict: VerdictDocument) -> dict[str, Any]:
    """The facts that tell one deployment from another, from the bundle's own evidence: the
    setup it was run with, and what its records and scrapes say of the deployment."""
    config = _yaml(root / EFFECTIVE_CONFIG)
    wanted = (config.get("target") or {}).get("model")
    seen = deployment_of(BundleReader(root), wanted if isinstance(wanted, str) else None)
    return {
        "target": verdict.target,
        "profile": verdict.profile,
        "image_digest": identity(root).image_digest,
        **{key: getattr(seen, key) for key in FIELDS},
        "problems": seen.problems,
    }


def refusals(
    parts: Sequence[Part], now: dt.datetime, max_age_days: float, assume_same: bool = False
) -> list[str]:
    """Why these parts cannot make one decision (empty: they can). `assume_same`: a fact
    known in one part and unknown in another is not a refusal (the reviewer said why)."""
    problems = []
    for part in parts:
        age = (now - part.finished_at).total_seconds() / 86400
        if age > max_age_days:
            problems.append(
                f"{part.root} finished {age:.1f} days ago, older than {max_age_days:g} days "
                "(--max-age-days): run that section again"
            )
    seen: dict[str, Path] = {}
    for part in parts:
        for section in part.sections:
            if section in seen:
                problems.append(
                    f"section {section} is in both {seen[section]} and {part.root}: give one"
                )
            seen[section] = part.root
    for part in parts:
        problems += [f"{part.root}: {p}" for p in part.deployment.get("problems") or ()]
    for key in (*SETUP_KEYS, *IDENTITY_KEYS):
        known = [(p, p.deployment[key]) for p in parts if p.deployment.get(key) is not None]
        if len({value for _, value in known}) > 1:
            problems.append(_differ(key, known))
        elif key in IDENTITY_KEYS and known and len(known) < len(parts) and not assume_same:
            knowing = [p.name for p, _ in known]
            unknown = ", ".join(p.name for p in parts if p.name not in knowing)
            problems.append(
                f"{key} is known in {', '.join(knowing)} but not in {unknown}: "
                "run those sections again with golive of this version, or give "
                "--assume-same-deployment REASON"
            )
    return problems


def merged_identity(found: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The combined bundle's identity: each field as the parts that know it agree on it."""
    merged: dict[str, Any] = dict.fromkeys(IDENTITY_KEYS)
    for facts in found:
        for key in IDENTITY_KEYS:
            if merged[key] is None and facts.get(key) is not None:
                merged[key] = facts[key]
    return {**merged, "problems": []}


def unknown_identity(parts: Sequence[Part]) -> list[str]:
    """The identity fields some parts know and others do not (what an assumption covers)."""
    return [
        key
        for key in IDENTITY_KEYS
        if 0 < sum(p.deployment.get(key) is not None for p in parts) < len(parts)
    ]


def _differ(key: str, values: Sequence[tuple[Part, Any]]) -> str:
    if key == "process_start":
        started: dict[float, list[str]] = {}
        for part, value in values:
            started.setdefault(float(value), []).append(part.name)
        runs = [
            f"{', '.join(names)} (process started {t:.0f})" for t, names in sorted(started.items())
        ]
        return (
            f"the server restarted between {' and '.join(runs)}: the sections did not measure "
            "one engine process; run them again against one"
        )
    listed = ", ".join(f"{v} ({p.root})" for p, v in values)
    return f"the parts describe different deployments: {key} {listed}"


def _yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def part_checks(part: Part) -> list[CheckResult]:
    """A part's checks as the combined bundle holds them (`rederive.as_part_checks`)."""
    return as_part_checks(part.verdict.results(), part.name)


def combine(
    roots: Sequence[Path],
    out: Path,
    config: GoliveConfig,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    now: dt.datetime | None = None,
    assume_same_deployment: str | None = None,
) -> Verdict:
    """Verify, compare and merge section bundles into one sealed decision at `out`.
    `assume_same_deployment`: the reviewer's reason to combine parts where one knows an
    identity field another lacks (recorded in verdict.json)."""
    started = dt.datetime.now(dt.UTC)
    parts = [read_part(root) for root in roots]
    reason = (assume_same_deployment or "").strip() or None
    problems = refusals(parts, now or started, max_age_days, assume_same=reason is not None)
    if problems:
        raise ConfigError("cannot combine these bundles: " + "; ".join(problems))
    policy = load_policy(None if config.policy is None else Path(config.policy))
    bundle = Bundle.create(out)
    for part in parts:
        shutil.copytree(part.root, out / PARTS / part.name)
    bundle.write_text(POLICY, policy.text)
    bundle.write_text(
        EFFECTIVE_CONFIG, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    )
    profile = load_profile(config.profile)
    refuse_lowering(policy, profile, config)
    checks = apply_policy(policy.policy, [c for p in parts for c in part_checks(p)], profile)
    covered = {s for p in parts for s in p.sections}
    scope: Scope = (
        PROGRAMME if covered >= set(SECTIONS) else tuple(s for s in SECTIONS if s in covered)
    )
    gap = combined_gap([p.root for p in parts], checks, scope == PROGRAMME)
    checks += apply_policy(policy.policy, gap, profile)
    decision = decide(checks, scope, waivers_for(policy.policy, checks, profile))
    first = parts[0].verdict
    document = verdict_document(
        config,
        first.profile,
        "decide --combine",
        started.isoformat(timespec="seconds"),
        checks,
        decision,
        scope,
        waivers=policy.policy.waivers(decision.waived),
        policy=policy.ref(),
        parts=tuple(
            PartEntry(
                bundle=str(p.root.resolve()),
                dir=f"{PARTS}/{p.name}",
                scope=p.sections,
                outcome=p.verdict.outcome,
                finished_at=p.verdict.finished_at,
                manifest_sha256=p.manifest_sha256,
            )
            for p in parts
        ),
        rollback_target=rollback_target(out),
        identity=merged_identity([p.deployment for p in parts]),
        assumed_same_deployment=None
        if reason is None
        else {"reason": reason, "unknown_in_some_parts": unknown_identity(parts)},
    )
    target = next((p.deployment["target"] for p in parts if p.deployment["target"]), None)
    document = document.model_copy(update={"target": target})
    write_verdict(bundle, document)
    bundle.seal()
    return Verdict(decision.outcome, out, document)
