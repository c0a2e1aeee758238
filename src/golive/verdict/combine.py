"""`golive decide --combine B1 B2 ...`: one programme decision from sealed section bundles
of one deployment — the second way to reach go-live, beside `golive run`.

Each part is verified (manifest) and re-derived (its sealed verdict must agree) first. Parts
that describe different deployments (image digest, vLLM version, served model, launch
config digest, target URL, profile) or are older than the allowed age are refused, naming
the difference. The combined bundle holds every part under `parts/<sections>/` (each with
its own manifest, cited by digest in verdict.json) and is decided by the same rules.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import EFFECTIVE_CONFIG, MANIFEST, PARTS, POLICY
from golive.bundle.store import Bundle
from golive.config import GoliveConfig
from golive.errors import BundleError, ConfigError
from golive.operate.rollback import identity
from golive.pipeline import Verdict, rollback_target, verdict_document, write_verdict
from golive.results import CheckResult
from golive.verdict.decide import decide
from golive.verdict.document import PartEntry, VerdictDocument
from golive.verdict.policy import apply_policy, load_policy
from golive.verdict.rederive import rederive
from golive.verdict.scope import PROGRAMME, SECTIONS, Scope, scope_from_json

DEFAULT_MAX_AGE_DAYS = 7.0
# What makes two bundles the same deployment; a value unknown in one part is not compared.
DEPLOYMENT_KEYS = (
    "target",
    "profile",
    "image_digest",
    "vllm_version",
    "served_model",
    "launch_config_digest",
)


@dataclass(frozen=True, slots=True)
class Part:
    root: Path
    verdict: VerdictDocument
    sections: tuple[str, ...]
    manifest_sha256: str
    finished_at: dt.datetime
    deployment: Mapping[str, str | None]

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
        raise ConfigError(f"{root}: its verdict does not re-derive ({'; '.join(again.problems)})")
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
        deployment_of(root, verdict),
    )


def deployment_of(root: Path, verdict: VerdictDocument) -> dict[str, str | None]:
    """The facts that tell one deployment from another, from the bundle's own evidence."""
    found = identity(root)
    version = (
        found["vllm_version"]
        or verdict.measurements("environment.vllm_version").get("vllm_version")
        or verdict.measurements("smoke.version").get("vllm_version")
    )
    config = _yaml(root / EFFECTIVE_CONFIG)
    model = (config.get("target") or {}).get("model") or verdict.measurements("smoke.models").get(
        "model"
    )
    return {
        "target": verdict.target,
        "profile": verdict.profile,
        "image_digest": found["image_digest"],
        "vllm_version": None if version is None else str(version),
        "served_model": None if model is None else str(model),
        "launch_config_digest": found["launch_config_digest"],
    }


def refusals(parts: Sequence[Part], now: dt.datetime, max_age_days: float) -> list[str]:
    """Why these parts cannot make one decision (empty: they can)."""
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
    for key in DEPLOYMENT_KEYS:
        values = {p.root: p.deployment.get(key) for p in parts if p.deployment.get(key)}
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{v} ({root})" for root, v in values.items())
            problems.append(f"the parts describe different deployments: {key} {listed}")
    return problems


def _yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def part_checks(part: Part) -> list[CheckResult]:
    """A part's checks with evidence paths inside the combined bundle; golive's own
    per-run checks (ledger, interrupts) keep the part's name so none is lost."""
    out = []
    for check in part.verdict.results():
        evidence = tuple(f"{PARTS}/{part.name}/{e}" for e in check.evidence)
        check_id = f"{check.id}@{part.name}" if check.id.startswith("golive.") else check.id
        out.append(dataclasses.replace(check, id=check_id, evidence=evidence))
    return out


def combine(
    roots: Sequence[Path],
    out: Path,
    config: GoliveConfig,
    max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    now: dt.datetime | None = None,
) -> Verdict:
    """Verify, compare and merge section bundles into one sealed decision at `out`."""
    started = dt.datetime.now(dt.UTC)
    parts = [read_part(root) for root in roots]
    problems = refusals(parts, now or started, max_age_days)
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
    checks = apply_policy(policy.policy, [c for p in parts for c in part_checks(p)])
    covered = {s for p in parts for s in p.sections}
    scope: Scope = (
        PROGRAMME if covered >= set(SECTIONS) else tuple(s for s in SECTIONS if s in covered)
    )
    decision = decide(checks, scope, policy.policy.waive)
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
    )
    target = next((p.deployment["target"] for p in parts if p.deployment["target"]), None)
    document = document.model_copy(update={"target": target})
    write_verdict(bundle, document)
    bundle.seal()
    return Verdict(decision.outcome, out, document)
