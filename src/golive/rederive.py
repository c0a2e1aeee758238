"""`golive decide BUNDLE`: re-derive the verdict offline from a sealed bundle, with the
policy saved inside it, and say whether it agrees with the sealed one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from golive.bundle import verify
from golive.decide import decide
from golive.errors import ConfigError
from golive.policy import POLICY_FILE, apply_policy, parse_policy
from golive.results import CheckResult, Decision, Outcome
from golive.scope import scope_from_json


@dataclass(frozen=True, slots=True)
class Rederived:
    sealed: Outcome
    decision: Decision
    problems: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return not self.problems


def rederive(root: Path) -> Rederived:
    verdict_path = root / "verdict.json"
    try:
        data = json.loads(verdict_path.read_text(encoding="utf-8"))
        sealed = Outcome(data["outcome"])
        checks = [CheckResult.from_json(c) for c in data["checks"]]
        scope = scope_from_json(data.get("scope"))
    except OSError as exc:
        raise ConfigError(
            f"{verdict_path}: cannot be read ({exc.strerror}); is it a bundle?"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{verdict_path}: not a golive verdict ({exc})") from exc
    problems = []
    report = verify(root)
    if not report.ok:
        changed = [
            f"{what}: {', '.join(paths)}"
            for what, paths in (
                ("altered", report.altered),
                ("missing", report.missing),
                ("added", report.extra),
            )
            if paths
        ]
        problems.append(f"the bundle does not match its manifest ({'; '.join(changed)})")
    policy_path = root / POLICY_FILE
    waive: dict[str, object] = {}
    if policy_path.is_file():
        policy = parse_policy(policy_path.read_text(encoding="utf-8"), str(policy_path))
        recorded = (data.get("policy") or {}).get("sha256")
        if recorded != policy.sha256:
            problems.append(
                f"{POLICY_FILE} has digest {policy.sha256}, verdict.json names {recorded}"
            )
        checks = apply_policy(policy.policy, checks)
        waive = dict(policy.policy.waive)
    decision = decide(checks, scope, waive)
    if decision.outcome is not sealed:
        problems.append(
            f"re-derived outcome {decision.outcome.value} differs from the sealed {sealed.value}"
        )
    sealed_rules = [r.get("rule") for r in data.get("rules_fired") or []]
    derived_rules = [r.rule for r in decision.rules_fired]
    if sealed_rules != derived_rules:
        problems.append(f"rules fired differ: sealed {sealed_rules}, re-derived {derived_rules}")
    return Rederived(sealed, decision, tuple(problems))
