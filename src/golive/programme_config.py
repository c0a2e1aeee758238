"""The `programme:` section of the config: what the acceptance programme may leave out (a
part the application does not use) and the rules a config weakens on purpose, each with the
owner who answers for it (`checks/coverage.py`, `checks/relaxations.py` judge them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from golive.strict_model import StrictModel


class UnusedPart(StrictModel):
    """A part of the programme the application does not use, and who says so."""

    part: str = Field(
        pattern=r"^(smoke\.classes|agent\.[A-Za-z0-9_.-]+)$",
        description="smoke.classes, or agent.<case> (an Agent case name)",
    )
    owner: str = Field(min_length=1, description="who answers for leaving it out")
    reason: str = Field(min_length=1, description="why the application does not use it")


# the settings that weaken a programme rule off their default (checks/relaxations.py RELAXABLE)
RelaxableSetting = Literal[
    "cache.after_load_probe",
    "cache.warm_must_be_faster",
    "agent.max_bounded_failure_share",
    "capacity.min_memory_headroom",
    "capacity.max_memory_growth",
    "capacity.max_kv_growth",
    "capacity.max_latency_growth",
    "capacity.max_retry_share",
    "capacity.max_queue_s",
    "capacity.max_queue_share",
    "capacity.stall_s",
    "capacity.answer_probes",
    "agent.non_critical",
    "cache.prefix_tokens",
]


class RelaxedSetting(StrictModel):
    """A programme rule the config weakens on purpose, and who answers for it."""

    setting: RelaxableSetting = Field(
        description="cache.after_load_probe, cache.warm_must_be_faster, "
        "agent.max_bounded_failure_share, capacity.min_memory_headroom, "
        "capacity.max_memory_growth, capacity.max_kv_growth, capacity.max_latency_growth, "
        "capacity.max_retry_share, capacity.max_queue_s, capacity.max_queue_share, "
        "capacity.stall_s, capacity.answer_probes, agent.non_critical (shipped critical "
        "cases lowered) or cache.prefix_tokens (below the profile's shared prefix)"
    )
    owner: str = Field(min_length=1, description="who answers for the weaker rule")
    reason: str = Field(min_length=1, description="why this deployment may be judged so")


class ProgrammeConfig(StrictModel):
    """What the acceptance programme may leave out: a request class or Agent case is left out
    only where the application does not use it, with an owner, and a rule is weakened only
    with an owner (else programme-incomplete)."""

    not_used: tuple[UnusedPart, ...] = Field(
        (), description="parts the application does not use: {part, owner, reason} each"
    )
    relaxed: tuple[RelaxedSetting, ...] = Field(
        (),
        description="settings moved off their default to a weaker rule: {setting, owner, "
        "reason} each (without one, a programme decision is programme-incomplete)",
    )
