"""What a policy file may not make non-critical, nor waive (issue 29 §2).

A policy weighs checks; it may not take back what the checklist calls blocking: the version
chain and the startup checks (failure signatures among them), golive's own integrity checks
(the ledger, the answering model, the profile, a stop), a critical Agent case, and the
cache proof where the profile says the workload depends on reuse. Nor may it waive a warn on
one of them, or on the memory checks: the checklist's go-live needs "the container, vLLM
build, CUDA runtime, host driver, memory behavior, prefix caching, and Agent interface" to
all pass, and a warn there is at best observe-with-limits, with an owner. A run whose policy
tries is refused before any traffic, naming the check; `golive decide` never applies such an
entry (a forged policy in a bundle cannot lower or waive them either).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping, Sequence

from golive.checks.agent.cases import AgentCase, shipped_cases
from golive.checks.agent.select import due_criticality, known_cases
from golive.checks.env.judge import CHAIN_CHECKS
from golive.config import GoliveConfig
from golive.errors import ConfigError
from golive.profiles import Profile
from golive.results import CheckResult

# check-id pattern -> why it stays critical (a check judged non-critical stays as judged)
ALWAYS: Mapping[str, str] = {
    "environment.*": "the version chain",
    "startup.*": "the startup checks (failure signatures, parsers, launch)",
    "target.*": "golive's integrity checks (the answering model, the profile)",
    "golive.*": "golive's integrity checks (the request ledger, a stop, its own headroom)",
    "agent.*": "a critical Agent case",
}
REUSE = "cache.prefix_reuse"
# checks whose warn no waiver covers, though a policy may weigh them: memory behaviour
MEMORY: Mapping[str, str] = {
    "capacity.memory": "memory behaviour under load, which go-live needs to pass",
    "capacity.model_load": "memory behaviour at model load, which go-live needs to pass",
}
INTEGRITY = (
    "target.identity",
    "target.profile",
    "golive.ledger",
    "golive.internal",
    "golive.interrupted",
    "golive.client_headroom",
)


def protected_patterns(profile: Profile | None) -> dict[str, str]:
    """Pattern -> reason, for this profile."""
    out = dict(ALWAYS)
    if profile is not None and profile.chain.prefix_caching_required:
        out[REUSE] = f"the {profile.name} profile's workload depends on prefix reuse"
    return out


def why_protected(check_id: str, profile: Profile | None) -> str | None:
    """Why no policy may lower `check_id` (None: a policy may)."""
    patterns = protected_patterns(profile)
    return next((r for p, r in patterns.items() if fnmatch.fnmatchcase(check_id, p)), None)


def protected_ids(profile: Profile, config: GoliveConfig) -> list[str]:
    """The concrete critical check ids a policy entry is tried against before a run."""
    agent = [
        f"agent.{case.name}"
        for case in _cases(config)
        if due_criticality(case, config.agent, profile).critical
    ]
    reuse = [REUSE] if profile.chain.prefix_caching_required else []
    return [*CHAIN_CHECKS, *INTEGRITY, *agent, *reuse]


def _cases(config: GoliveConfig) -> tuple[AgentCase, ...]:
    """The Agent cases a policy is tried against before a run: the shipped ones and one per
    tool of the user's schema file (a critical tool of theirs is as protected as a shipped
    critical case); the shipped ones alone where that file cannot be read — the run itself
    refuses such a file, naming it."""
    try:
        return known_cases(config.agent)
    except ConfigError:
        return shipped_cases()


def policy_lowers(
    critical: Mapping[str, bool], profile: Profile, config: GoliveConfig
) -> list[str]:
    """Each protected check a policy's `critical` entries would make non-critical, with the
    entry and the reason (empty: the policy may be applied)."""
    out = []
    for check_id in protected_ids(profile, config):
        entry = _winning(critical, check_id)
        if entry is not None and critical[entry] is False:
            out.append(f"{check_id} (by {entry!r}: {why_protected(check_id, profile)})")
    return out


def _winning(critical: Mapping[str, bool], check_id: str) -> str | None:
    """The entry that decides `check_id`: the longest matching pattern, as applied."""
    matches: Sequence[str] = [p for p in critical if fnmatch.fnmatchcase(check_id, p)]
    return max(matches, key=len) if matches else None


# a watch item among the protected families, which a policy may waive with an owner
WAIVABLE = frozenset({"environment.k8s_restarts"})


def _unwaivable(check_id: str, profile: Profile | None, critical: bool) -> str | None:
    """Why no waiver may cover a warn on `check_id`: a memory check; any chain, startup or
    integrity check (critical or not: go-live needs them passed), but the listed watch
    items; an Agent case that is `critical`; the reuse proof where the profile needs it."""
    base = check_id.split("@", 1)[0]
    if base in MEMORY:
        return MEMORY[base]
    if base in WAIVABLE:
        return None
    reason = why_protected(check_id, profile)
    if reason is not None and fnmatch.fnmatchcase(check_id, "agent.*") and not critical:
        return None
    return reason


def why_unwaivable(check: CheckResult, profile: Profile | None) -> str | None:
    """Why no waiver may cover a warn on `check` as judged (None: a policy may waive it)."""
    return _unwaivable(check.id, profile, check.critical)


def policy_waives(waive: Collection[str], profile: Profile, config: GoliveConfig) -> list[str]:
    """Each check a policy's `waive` entries name that no waiver may cover, with the reason
    (empty: the waivers may be applied). An Agent case is known critical here where the
    shipped cases, the config and the profile make it so; any other Agent check is judged
    when the run has judged it (`why_unwaivable`: a critical one is not waived)."""
    critical = set(protected_ids(profile, config))
    found = ((c, _unwaivable(c, profile, c in critical)) for c in waive)
    return [f"{check_id} ({reason})" for check_id, reason in found if reason is not None]
