"""Programme rules a config weakens (checklist: a go-live decision is taken on the rules as
written, or on a weakening someone owns).

A setting in `RELAXABLE` moved off its default toward the weaker side turns a programme rule
off or loosens it: each such setting is a coverage gap unless `programme.relaxed` names an
owner and a reason for it; a rule the profile makes critical refuses any owner
(`profile_refusals` stops a run before traffic). `checks/coverage.py` carries the gaps and the
owned entries into each family's `<family>.coverage` check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pydantic import BaseModel

from golive.config import AgentConfig, GoliveConfig
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig, RelaxedSetting

# setting -> (which way is weaker, the rule it weakens): a programme decision takes the
# default, or the config's word with an owner (`programme.relaxed`)
RELAXABLE: Mapping[str, tuple[str, str]] = {
    "cache.after_load_probe": (
        "off",
        "the warm prefix is probed again after the sustained window (reused, or evicted by "
        "the load)",
    ),
    "cache.warm_must_be_faster": (
        "off",
        "a warm request that reuses the prefix but is no faster than a cold one is a warn",
    ),
    "agent.max_bounded_failure_share": (
        "higher",
        "a non-critical Agent case failing in more than {default:.0%} of its runs is not a "
        "known, bounded defect",
    ),
    "capacity.min_memory_headroom": (
        "lower",
        "each GPU keeps {default:.0%} of its memory spare at its busiest moment",
    ),
    "capacity.max_memory_growth": (
        "higher",
        "a GPU's memory growing more than {default:.0%} of it over the sustained window is a limit",
    ),
    "capacity.max_kv_growth": (
        "higher",
        "the KV cache usage growing more than {default:.0%} over the sustained window is a limit",
    ),
    "capacity.max_latency_growth": (
        "higher",
        "latency drifting up more than {default:.0%} over the sustained window is a limit",
    ),
    "capacity.max_retry_share": (
        "higher",
        "a load window retrying more than {default:.0%} of its requests is a retry storm, "
        "not stable",
    ),
    "capacity.max_queue_s": (
        "higher",
        "a ramp step whose p95 queue time passes {default:g} s (and its share of latency) "
        "waits too long",
    ),
    "capacity.max_queue_share": (
        "higher",
        "a ramp step queueing more than {default:.0%} of its median latency waits too long",
    ),
    "capacity.stall_s": (
        "higher",
        "no byte of any answer for {default:g} s with requests in flight is a stall",
    ),
    "capacity.answer_probes": (
        "off",
        "known-answer probes go inside the sustained window (capacity.answers_under_load)",
    ),
}


class Relaxations(NamedTuple):
    """The programme rules a config section weakens: a gap for each without an owner, and
    the `programme.relaxed` entries that give one."""

    gaps: tuple[str, ...] = ()
    owned: tuple[RelaxedSetting, ...] = ()


AS_WRITTEN = Relaxations()  # no rule weakened


def profile_needs(profile: Profile) -> dict[str, str]:
    """The relaxable settings the profile makes critical (setting: the profile's name): no
    owner relaxes them, and a run refuses them before traffic."""
    return (
        {"capacity.answer_probes": profile.name}
        if profile.capacity.answers_under_load_critical
        else {}
    )


def _weakened(setting: str, settings: BaseModel) -> tuple[object, object] | None:
    """(value, default) where `settings` (the setting's config section) weakens the
    RELAXABLE `setting`; None where it keeps the rule as written."""
    weaker, _ = RELAXABLE[setting]
    key = setting.partition(".")[2]
    value = getattr(settings, key)
    default = type(settings).model_fields[key].default
    if not {"off": value is False, "higher": value > default, "lower": value < default}[weaker]:
        return None
    return value, default


def _kept_by_profile(setting: str, value: object, default: object, profile_name: str) -> str:
    rule = RELAXABLE[setting][1].format(default=default)
    return (
        f"{setting} is {_setting(value)}, but the {profile_name} profile makes the rule that "
        f"{rule} critical: set it back (no owner can relax it)"
    )


def profile_refusals(profile: Profile, config: GoliveConfig) -> list[str]:
    """Each setting of `config` that weakens a rule the profile makes critical (empty: the
    run may start)."""
    out = []
    for setting, name in profile_needs(profile).items():
        found = _weakened(setting, getattr(config, setting.partition(".")[0]))
        if found is not None:
            out.append(_kept_by_profile(setting, *found, name))
    return out


def relaxed_gaps(
    programme: ProgrammeConfig,
    section: str,
    settings: BaseModel,
    needs: Mapping[str, str] | None = None,
) -> Relaxations:
    """The programme rules `settings` (the config's `section`) weakens: a gap for each one
    `programme.relaxed` does not give an owner for, and the entries that do. A rule in
    `needs` (`profile_needs`) is a gap whatever owner is given."""
    gaps: list[str] = []
    owned: list[RelaxedSetting] = []
    for setting, (_, rule) in RELAXABLE.items():
        if setting.partition(".")[0] != section:
            continue
        found = _weakened(setting, settings)
        if found is None:
            continue
        value, default = found
        if needs and setting in needs:
            gaps.append(_kept_by_profile(setting, value, default, needs[setting]))
            continue
        said = next((r for r in programme.relaxed if r.setting == setting), None)
        if said is not None:
            owned.append(said)
            continue
        gaps.append(
            f"{setting} is {_setting(value)} (default {_setting(default)}), so the rule that "
            f"{rule.format(default=default)} is not applied: set it back, or record it under "
            "programme.relaxed with an owner and a reason"
        )
    return Relaxations(tuple(gaps), tuple(owned))


def lowered_cases(programme: ProgrammeConfig, agent: AgentConfig) -> Relaxations:
    """Shipped Agent cases critical by definition that `agent.non_critical` lowers: a repeated
    failure there would be a bounded defect instead of a hold, so it is a gap unless
    `programme.relaxed` names an owner for `agent.non_critical` (a policy may not lower them
    at all). The team's own tools (`--schemas`) are theirs to weigh."""
    # here, not at the top: the agent family's package imports its judge, which imports this
    from golive.checks.agent.cases import shipped_cases

    shipped = {case.name for case in shipped_cases() if case.critical}
    lowered = [name for name in agent.non_critical if name in shipped]
    if not lowered:
        return AS_WRITTEN
    said = next((r for r in programme.relaxed if r.setting == "agent.non_critical"), None)
    if said is not None:
        return Relaxations((), (said,))
    return Relaxations(
        (
            f"agent.non_critical lowers {', '.join(lowered)}, critical by definition, so a "
            "repeated failure there is not a hold: remove them from it, or record "
            "agent.non_critical under programme.relaxed with an owner and a reason",
        ),
    )


def _setting(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}"
