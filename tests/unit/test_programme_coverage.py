"""Programme completeness (issue 29 §2): every request class and Agent case the profile lists,
each repeated enough (agent.repeat >= 3, cache.warm_repeats >= 2), or the config's word, with
an owner, that the application does not use it. Anything less is `programme-incomplete`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from golive.capacity_config import CapacityConfig
from golive.checks.agent.cases import shipped_cases
from golive.checks.agent.select import cases_for
from golive.checks.coverage import (
    MIN_AGENT_REPEAT,
    MIN_WARM_REPEATS,
    agent_coverage,
    cache_coverage,
    smoke_coverage,
    with_sustained_coverage,
)
from golive.checks.relaxations import lowered_cases, relaxed_gaps
from golive.config import AgentConfig, CacheConfig
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.pipeline import run_inputs
from golive.profiles import load_profile
from golive.programme_config import ProgrammeConfig, RelaxedSetting, UnusedPart
from golive.results import (
    CheckClass,
    CheckResult,
    Classification,
    Outcome,
    SkipReason,
    Status,
)
from golive.verdict.decide import decide
from golive.verdict.scope import PROGRAMME

SHIPPED = ("one_arg.required", "one_arg.auto", "structured")
FULL = dict.fromkeys(SHIPPED, MIN_AGENT_REPEAT)  # runs per case in its less-run mode
OWNED = UnusedPart(part="agent.one_arg.auto", owner="agent team", reason="no auto tool choice")


def _programme(*unused: UnusedPart) -> ProgrammeConfig:
    return ProgrammeConfig(not_used=unused)


@pytest.mark.parametrize(
    ("runs", "unused", "critical", "gaps"),
    [
        (FULL, (), (), []),
        # a one-case agent.cases: the others are left out
        ({"one_arg.required": 3}, (), (), ["left out (agent.cases): one_arg.auto, structured"]),
        # agent.repeat 1, or every plain answer of a case gone: fewer than 3 in a mode
        ({**FULL, "structured": 1}, (), (), ["fewer than the 3 times", "structured 1"]),
        ({**FULL, "structured": 0}, (), (), ["structured 0"]),
        # the application does not use auto tool choice, and says who decided so
        ({"one_arg.required": 3, "structured": 3}, (OWNED,), (), []),
        # ... but the profile makes it the main path: it must run
        ({"one_arg.required": 3, "structured": 3}, (OWNED,), ("one_arg.auto",), ["critical"]),
        # every case declared unused: no Agent contract at all
        ({}, (), (), ["no Agent case ran"]),
    ],
    ids=[
        "complete",
        "one-case",
        "repeat-1",
        "one-mode",
        "declared-unused",
        "critical-declared",
        "none",
    ],
)
def test_agent_coverage(
    runs: dict[str, int],
    unused: tuple[UnusedPart, ...],
    critical: tuple[str, ...],
    gaps: list[str],
) -> None:
    """Each gap is critical and skipped (left out) naming the case and how to close it; a
    declared-unused case passes naming its owner."""
    selected = tuple(runs)  # agent.cases as the config gave them
    result = agent_coverage(_programme(*unused), SHIPPED, runs, selected, critical, "plan")
    if not gaps:
        assert result.status is Status.PASS, result.summary
        if unused:
            assert "not used (agent team: no auto tool choice)" in result.summary
        return
    assert result.status is Status.SKIPPED
    assert result.critical
    assert result.classification is Classification.PROGRAMME_INCOMPLETE
    assert result.skip_reason is SkipReason.LEFT_OUT
    for gap in gaps:
        assert gap in result.summary, result.summary
    assert "programme.not_used" in result.summary


def test_smoke_and_cache_coverage() -> None:
    """Classes that did not run are a gap unless declared unused with an owner; fewer than two
    warm requests are a gap."""
    assert smoke_coverage(_programme(), True, True, "s").status is Status.PASS
    missing = smoke_coverage(_programme(), False, False, "s")
    assert missing.status is Status.SKIPPED
    assert "smoke.classes: false" in missing.summary
    batch = UnusedPart(part="smoke.classes", owner="api team", reason="single-turn batch API")
    declared = smoke_coverage(_programme(batch), False, False, "s")
    assert declared.status is Status.PASS
    assert "api team" in declared.summary
    # the config ran them, yet their records are gone: no declaration covers lost evidence
    lost = smoke_coverage(_programme(batch), False, True, "s")
    assert lost.status is Status.SKIPPED
    assert "were to run" in lost.summary
    assert cache_coverage(MIN_WARM_REPEATS, "c").status is Status.PASS
    short = cache_coverage(MIN_WARM_REPEATS - 1, "c")
    assert short.status is Status.SKIPPED
    assert "cache.warm_repeats" in short.summary


def _passing(check_id: str, check_class: CheckClass) -> CheckResult:
    return CheckResult(check_id, check_class, True, Status.PASS, "ok", {}, ())


PARTS = [
    _passing("environment.vllm_version", CheckClass.ENVIRONMENT),
    _passing("smoke.text", CheckClass.SMOKE),
    *(
        _passing(p, CheckClass.CAPACITY)
        for p in (
            "capacity.model_load",
            "capacity.long_input",
            "capacity.concurrency",
            "capacity.sustained",
        )
    ),
    _passing("cache.prefix_reuse", CheckClass.CACHE),
    _passing("agent.one_arg.required", CheckClass.AGENT),
]


def _sustained(duration_s: float | None, completed: int | None) -> CheckResult:
    measured = {"duration_s": duration_s, "completed": completed}
    return CheckResult(
        "capacity.sustained", CheckClass.CAPACITY, True, Status.PASS, "stable", measured, ("x",)
    )


@pytest.mark.parametrize(
    ("duration_s", "completed", "expected"),
    [
        (600.0, 30, Status.PASS),
        (545.0, 400, Status.PASS),  # cut by its request cap after 90% of its length
        (50.0, 400, Status.SKIPPED),  # a floor lowered in the config: not a programme
        (900.0, 12, Status.SKIPPED),  # long but too few answers to judge a drift on
        (None, None, None),  # the window did not run: capacity.sustained says why
    ],
)
def test_sustained_coverage(
    duration_s: float | None, completed: int | None, expected: Status | None
) -> None:
    """A programme decision needs a 10-minute sustained window with 30 answers, whatever
    capacity.min_sustained_s says; a run with no programme config (None) is not judged on it."""
    sustained = _sustained(duration_s, completed)
    checks = with_sustained_coverage(sustained, ProgrammeConfig(), CapacityConfig(), GENERIC)
    assert checks[0].id == "capacity.sustained"
    coverage = checks[1] if len(checks) > 1 else None
    assert (coverage.status if coverage else None) is expected
    if coverage is not None and expected is Status.SKIPPED:
        assert coverage.critical
        assert coverage.classification is Classification.PROGRAMME_INCOMPLETE
        assert "--duration 600" in coverage.summary or "at least 30 answers" in coverage.summary
    assert len(with_sustained_coverage(_sustained(50.0, 400), None, CapacityConfig(), GENERIC)) == 1


RELAXED_BY = {
    "cache.after_load_probe": RelaxedSetting(
        setting="cache.after_load_probe", owner="cache team", reason="no retention needed"
    ),
    "agent.max_bounded_failure_share": RelaxedSetting(
        setting="agent.max_bounded_failure_share", owner="agent team", reason="auto is a beta"
    ),
    "capacity.min_memory_headroom": RelaxedSetting(
        setting="capacity.min_memory_headroom", owner="platform", reason="dedicated nodes"
    ),
    "capacity.answer_probes": RelaxedSetting(
        setting="capacity.answer_probes", owner="platform", reason="answers checked elsewhere"
    ),
}


GENERIC = load_profile("generic")


def _relaxed_coverage(
    family: str, settings: dict[str, object], owned: bool, profile: str = "generic"
) -> CheckResult:
    """`<family>.coverage` of a complete run under `settings` (that family's config keys),
    with an owner for each weakened rule where `owned`."""
    programme = ProgrammeConfig(relaxed=tuple(RELAXED_BY.values()) if owned else ())
    if family == "cache":
        cache = CacheConfig.model_validate(settings)
        return cache_coverage(
            MIN_WARM_REPEATS, "cache-steps", relaxed_gaps(programme, "cache", cache)
        )
    if family == "agent":
        agent = AgentConfig.model_validate(settings)
        weaker = relaxed_gaps(programme, "agent", agent)
        return agent_coverage(programme, SHIPPED, FULL, None, (), "plan", weaker)
    capacity = CapacityConfig.model_validate(settings)
    checks = with_sustained_coverage(
        _sustained(600.0, 30), programme, capacity, load_profile(profile)
    )
    return checks[1]


@pytest.mark.parametrize(
    ("family", "settings", "named"),
    [
        ("cache", {"after_load_probe": False}, "cache.after_load_probe is false (default true)"),
        ("cache", {"warm_must_be_faster": False}, "cache.warm_must_be_faster is false"),
        ("agent", {"max_bounded_failure_share": 1.0}, "is 1 (default 0.2), so the rule that a"),
        ("capacity", {"min_memory_headroom": 0.0}, "is 0 (default 0.1), so the rule that each"),
        ("capacity", {"max_memory_growth": 1.0}, "capacity.max_memory_growth is 1 (default"),
        ("capacity", {"max_kv_growth": 1.0}, "capacity.max_kv_growth is 1 (default 0.05)"),
        ("capacity", {"max_latency_growth": 5.0}, "latency drifting up more than 20%"),
        ("capacity", {"max_retry_share": 1.0}, "retrying more than 5% of its requests is a"),
        ("capacity", {"max_queue_s": 30.0}, "p95 queue time passes 0.5 s"),
        ("capacity", {"max_queue_share": 5.0}, "queueing more than 25% of its median latency"),
        ("capacity", {"stall_s": 600.0}, "no byte of any answer for 20 s with requests"),
        ("capacity", {"answer_probes": False}, "capacity.answer_probes is false (default true)"),
    ],
)
def test_a_weakened_rule_needs_an_owner(
    family: str, settings: dict[str, object], named: str
) -> None:
    """Issue 29 §2: a config switching off a programme rule (the after-load probe, the
    cold/warm comparison) or loosening it (the bounded failure share, the memory headroom)
    leaves that part of the programme out: programme-incomplete, naming the setting and
    how to close it, unless `programme.relaxed` names who answers for it."""
    gap = _relaxed_coverage(family, settings, owned=False)
    assert gap.status is Status.SKIPPED, gap.summary
    assert gap.classification is Classification.PROGRAMME_INCOMPLETE
    assert named in gap.summary, gap.summary
    assert "programme.relaxed" in gap.summary
    setting = f"{family}.{next(iter(settings))}"
    owned = _relaxed_coverage(family, settings, owned=setting in RELAXED_BY)
    if setting in RELAXED_BY:
        assert owned.status is Status.PASS, owned.summary
        said = RELAXED_BY[setting]
        assert f"{setting} relaxed ({said.owner}: {said.reason})" in owned.summary
        assert owned.measurements["relaxed"] == f"{setting} relaxed ({said.owner}: {said.reason})"
    else:  # an owner for other settings does not cover this one
        assert owned.status is Status.SKIPPED


@pytest.mark.parametrize(
    ("family", "settings"),
    [
        ("cache", {}),
        ("agent", {"max_bounded_failure_share": 0.1}),  # stricter than the default
        ("capacity", {"min_memory_headroom": 0.2}),
    ],
)
def test_default_or_stricter_rules_need_no_owner(family: str, settings: dict[str, object]) -> None:
    """The defaults, or stricter values, are the programme as written: no gap, nothing said."""
    coverage = _relaxed_coverage(family, settings, owned=False)
    assert coverage.status is Status.PASS, coverage.summary
    assert "relaxed" not in coverage.summary


def test_a_gap_holds_a_programme_and_is_named_in_a_section() -> None:
    """Every check passed but agent.repeat was 1: hold (programme-incomplete, naming it), not
    missing evidence or a critical failure (a policy cannot waive or lower it); the same
    agent section alone is section-passed and says what a programme combined from it will
    lack. A coverage check alone is not an Agent section that ran."""
    short = agent_coverage(
        _programme(), ("one_arg.required",), {"one_arg.required": 1}, None, (), "p"
    )
    assert decide(PARTS).outcome is Outcome.GO_LIVE
    decision = decide([*PARTS, short])
    assert decision.outcome is Outcome.HOLD
    (rule,) = decision.rules_fired
    assert rule.rule == "programme-incomplete"
    assert rule.check_ids == ("agent.coverage",)
    assert "fewer than the 3 times" in rule.reason
    section = decide([PARTS[-1], short], ("agent",))
    assert section.outcome is Outcome.SECTION_PASSED
    assert "programme-incomplete" in [r.rule for r in section.rules_fired]
    assert decide([*PARTS, short], PROGRAMME, {"agent.coverage": "waived"}).outcome is Outcome.HOLD
    passed = agent_coverage(_programme(), (), {}, (), (), "p")
    without_cases = [*PARTS[:-1], dataclasses.replace(passed, status=Status.PASS)]
    (alone,) = decide(without_cases).rules_fired
    assert "agent (the Agent contract)" in alone.reason


def test_config_programme_section(tmp_path: Path) -> None:
    """A new run is always judged on completeness; `programme: null` and a declaration without
    an owner are refused, naming the key."""
    assert load_config(None).programme == ProgrammeConfig()
    empty = tmp_path / "golive.yaml"
    empty.write_text("programme:\n")
    with pytest.raises(ConfigError, match="programme is empty"):
        load_config(empty)
    with pytest.raises(ConfigError, match="owner"):
        load_config(None, {"programme.not_used": [{"part": "smoke.classes", "reason": "x"}]})
    with pytest.raises(ConfigError, match="part"):
        load_config(None, {"programme.not_used": [{"part": "cache", "owner": "a", "reason": "b"}]})


def test_not_used_names_real_cases_and_never_the_profiles_main_path() -> None:
    """An unknown case name is refused before any traffic, and so is declaring kimi-k3's
    critical tool_choice=auto case unused."""
    config = load_config(None)
    typo = _programme(UnusedPart(part="agent.one_arg.atuo", owner="a", reason="b"))
    with pytest.raises(ConfigError, match=r"agent\.one_arg\.atuo is not an Agent case"):
        cases_for(config.agent, load_profile("generic"), typo)
    k3 = load_profile("kimi-k3")
    main_path = _programme(
        UnusedPart(part=f"agent.{k3.agent.critical_cases[0]}", owner="a", reason="b")
    )
    with pytest.raises(ConfigError, match="critical under the kimi-k3 profile"):
        cases_for(config.agent, k3, main_path)
    assert cases_for(config.agent, load_profile("generic"), _programme(OWNED))


def test_the_cases_required_are_shipped() -> None:
    """The literal list of cases every bundle must run is golive's shipped set (a case
    removed from the shipped set must leave the list, or every run would hold)."""
    from golive.checks.agent.cases import shipped_cases
    from golive.checks.coverage import SHIPPED_CASES

    assert set(SHIPPED_CASES) <= {c.name for c in shipped_cases()}


def test_no_owner_relaxes_what_the_profile_makes_critical() -> None:
    """Under kimi-k3 the answers under load are a critical check: switching the probes off is
    a gap whatever owner the config names (and a run refuses it before traffic)."""
    gap = _relaxed_coverage("capacity", {"answer_probes": False}, owned=True, profile="kimi-k3")
    assert gap.status is Status.SKIPPED
    assert "the kimi-k3 profile makes the rule that known-answer probes" in gap.summary
    assert "no owner can relax it" in gap.summary
    config = load_config(None, {"profile": "kimi-k3", "capacity.answer_probes": False})
    with pytest.raises(ConfigError, match=r"capacity\.answer_probes is false, but the kimi-k3"):
        run_inputs(config)


@pytest.mark.parametrize("owned", [False, True])
def test_lowering_a_critical_case_in_the_config_needs_an_owner(owned: bool) -> None:
    """`agent.non_critical` naming a shipped critical case (one_arg.required) turns its
    repeated failure into a bounded defect, which a policy is refused for: without an owner
    it is a programme gap naming the case; with `programme.relaxed` for agent.non_critical
    it is said, with its owner. A shipped non-critical case listed there is no gap."""
    said = RelaxedSetting(setting="agent.non_critical", owner="agent team", reason="beta path")
    programme = ProgrammeConfig(relaxed=(said,) if owned else ())
    agent = AgentConfig(non_critical=("one_arg.required",))
    weaker = lowered_cases(programme, agent)
    coverage = agent_coverage(programme, SHIPPED, FULL, None, (), "plan", weaker)
    if owned:
        assert coverage.status is Status.PASS, coverage.summary
        assert "agent.non_critical relaxed (agent team: beta path)" in coverage.summary
    else:
        assert coverage.status is Status.SKIPPED
        assert "agent.non_critical lowers one_arg.required, critical by definition" in (
            coverage.summary
        )
    plain = next(c.name for c in shipped_cases() if not c.critical)
    assert lowered_cases(ProgrammeConfig(), AgentConfig(non_critical=(plain,))).gaps == ()
