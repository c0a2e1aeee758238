"""The decision policy: a versioned file saying which checks are critical. Its sha256 goes
into verdict.json, and `golive decide BUNDLE` re-applies the saved copy, so a verdict can be
re-derived offline and shown to come from the policy it names.

Thresholds live in the config (its digest is in verdict.json too); the policy only changes
what a check's result weighs: `critical` maps check-id patterns (fnmatch) to true/false, and
`waive` names warn checks (exact ids) that do not hold back go-live, each with a reason and
an owner, recorded in verdict.json `waivers` and shown in the report.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from golive.config import GoliveConfig, StrictModel
from golive.errors import ConfigError
from golive.profiles import Profile
from golive.results import CheckResult
from golive.verdict.document import PolicyRef, WaiverEntry
from golive.verdict.protected import (
    policy_lowers,
    policy_waives,
    why_protected,
    why_unwaivable,
)

DEFAULT = "policy-default.yaml"


class Waiver(StrictModel):
    reason: str = Field(min_length=1, description="why this warn does not block go-live")
    owner: str = Field(min_length=1, description="who answers for it")


class Policy(StrictModel):
    name: str = Field(min_length=1)
    version: int = Field(ge=1)
    description: str = ""
    critical: dict[str, bool] = Field(
        default_factory=dict, description="check-id pattern (fnmatch) -> critical"
    )
    waive: dict[str, Waiver] = Field(
        default_factory=dict, description="warn check id (exact) -> reason and owner"
    )

    def waivers(self, waived: Sequence[str]) -> tuple[WaiverEntry, ...]:
        """verdict.json `waivers`: the warns this policy waived, with reason and owner."""
        return tuple(
            WaiverEntry(check=check, reason=self.waive[check].reason, owner=self.waive[check].owner)
            for check in waived
        )


@dataclass(frozen=True, slots=True)
class LoadedPolicy:
    policy: Policy
    text: str

    @property
    def sha256(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def ref(self) -> PolicyRef:
        """verdict.json `policy`: which policy decided, and its digest."""
        return PolicyRef(name=self.policy.name, version=self.policy.version, sha256=self.sha256)


def default_text() -> str:
    return resources.files("golive.profiles").joinpath(DEFAULT).read_text()


def load_policy(path: Path | None) -> LoadedPolicy:
    """The bundled default policy, or the user's file (errors name the file and field). A
    file may not call itself the bundled default unless it is, byte for byte."""
    if path is None:
        return parse_policy(default_text(), f"bundled {DEFAULT}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--policy {path}: cannot be read ({exc.strerror})") from exc
    loaded = parse_policy(text, str(path))
    problem = impersonation(loaded)
    if problem is not None:
        raise ConfigError(f"--policy {path}: {problem}; give your policy its own name")
    return loaded


def refuse_lowering(loaded: LoadedPolicy, profile: Profile, config: GoliveConfig) -> None:
    """Before any traffic: a policy that would make a protected check non-critical, or waive
    a warn no waiver may cover, is refused, naming each check, the entry and why."""
    lowered = policy_lowers(loaded.policy.critical, profile, config)
    if lowered:
        raise ConfigError(
            f"policy {loaded.policy.name!r} may not make non-critical: {'; '.join(lowered)}. "
            "Remove those entries (a policy may raise what is critical, not lower these)"
        )
    waived = policy_waives(loaded.policy.waive, profile, config)
    if waived:
        raise ConfigError(
            f"policy {loaded.policy.name!r} may not waive: {'; '.join(waived)}. Remove those "
            "`waive` entries: a warn there is observe-with-limits with an owner, or a "
            "reviewer's recorded override at sign-off (golive signoff --override-reason)"
        )


def waivers_for(
    policy: Policy | None, checks: Sequence[CheckResult], profile: Profile | None
) -> Mapping[str, Waiver]:
    """The policy's waivers that may apply to these checks: none over a check no waiver may
    cover (a policy in a bundle written before the rule, or forged, is judged so too)."""
    if policy is None:
        return {}
    unwaivable = {c.id for c in checks if why_unwaivable(c, profile) is not None}
    return {cid: w for cid, w in policy.waive.items() if cid not in unwaivable}


def impersonation(loaded: LoadedPolicy) -> str | None:
    """Why a policy that names itself as the bundled default is not it, or None."""
    default = parse_policy(default_text(), f"bundled {DEFAULT}")
    if loaded.policy.name != default.policy.name or loaded.text == default.text:
        return None
    return (
        f"it calls itself {default.policy.name!r}, the bundled default, but differs from it "
        f"({loaded.sha256}, the default is {default.sha256})"
    )


def parse_policy(text: str, source: str) -> LoadedPolicy:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    try:
        policy = Policy.model_validate(data if data is not None else {})
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigError(f"{source}: not a golive policy ({where})") from exc
    return LoadedPolicy(policy, text)


def apply_policy(
    policy: Policy, checks: Sequence[CheckResult], profile: Profile | None
) -> list[CheckResult]:
    """Checks with the policy's criticality; the most specific (longest) pattern wins. A
    critical check the policy may not lower (`verdict/protected.py`) stays critical."""
    patterns = sorted(policy.critical.items(), key=lambda item: len(item[0]), reverse=True)
    out = []
    for check in checks:
        match = next((v for p, v in patterns if fnmatch.fnmatchcase(check.id, p)), None)
        if match is False and check.critical and why_protected(check.id, profile) is not None:
            match = None
        out.append(check if match is None else dataclasses.replace(check, critical=match))
    return out
