"""Issue 29 §2: what a policy file (and the bundle's own plan) may not lower.

The checklist makes the version chain, startup failure signatures, a critical Agent case
and — where the workload depends on reuse — the cache proof blocking. A policy that would
make one non-critical is refused before any traffic; a forged policy or Agent plan inside a
bundle changes nothing `golive decide` re-derives. Under kimi-k3, tool_choice=auto is the
main Agent path: critical. Bundles here are the recorded demo (tests/data/golden-demo)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from golive.bundle.layout import AGENT_PLAN, POLICY, VERDICT
from golive.bundle.store import Bundle, BundleReader
from golive.checks.agent.judge import judge_agent
from golive.checks.agent.select import cases_for
from golive.checks.smoke.collect import run_smoke
from golive.config import AgentConfig
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.profiles import load_profile
from golive.results import CheckClass, CheckResult, Status
from golive.verdict.policy import (
    Policy,
    Waiver,
    apply_policy,
    load_policy,
    refuse_lowering,
    waivers_for,
)

GOLDEN = Path(__file__).parents[1] / "data/golden-demo"


def _policy(tmp_path: Path, entries: dict[str, bool]) -> Path:
    lines = "".join(f"  '{k}': {str(v).lower()}\n" for k, v in entries.items())
    path = tmp_path / "policy.yaml"
    path.write_text(f"name: lenient\nversion: 1\ncritical:\n{lines}")
    return path


@pytest.mark.parametrize(
    ("profile", "entries", "named"),
    [
        ("generic", {"environment.*": False}, "environment.vllm_version (by 'environment.*'"),
        ("generic", {"startup.log": False}, "startup.log (by 'startup.log'"),
        ("generic", {"agent.*": False}, "agent.one_arg.required (by 'agent.*': a critical"),
        ("generic", {"*": False}, "target.identity (by '*'"),
        ("kimi-k3", {"cache.*": False}, "cache.prefix_reuse (by 'cache.*': the kimi-k3"),
        ("kimi-k3", {"agent.one_arg.auto": False}, "agent.one_arg.auto"),
        # the longest matching entry decides, as when the policy is applied
        ("generic", {"*": True, "environment.gpus*": False}, "environment.gpus (by"),
    ],
)
async def test_a_policy_lowering_a_blocking_check_is_refused_before_traffic(
    tmp_path: Path, profile: str, entries: dict[str, bool], named: str
) -> None:
    """Refused as a configuration error naming the check, the entry and why; no bundle."""
    config = load_config(
        None,
        {
            "target.url": "http://127.0.0.1:9",
            "profile": profile,
            "policy": str(_policy(tmp_path, entries)),
        },
    )
    with pytest.raises(ConfigError, match="may not make non-critical") as refused:
        await judge(config, tmp_path / "b", "smoke", run_smoke, ("smoke",))
    assert named in str(refused.value)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("profile", "entries"),
    [
        ("generic", {"smoke.metrics": False}),
        ("generic", {"cache.*": False}),  # the generic workload is not said to need reuse
        ("generic", {"agent.one_arg.auto": False}),  # non-critical by default already
        ("generic", {"environment.*": True}),  # raising is always allowed
    ],
)
def test_what_a_policy_may_still_weigh(
    tmp_path: Path, profile: str, entries: dict[str, bool]
) -> None:
    """The checks a policy may still make non-critical are applied as written."""
    config = load_config(None, {"profile": profile})
    loaded = load_policy(_policy(tmp_path, entries))
    refuse_lowering(loaded, load_profile(profile), config)  # no error


def test_applying_a_forged_policy_keeps_protected_checks_critical() -> None:
    """A policy that never went through the refusal (one written into a bundle): its entries
    lower what they may, and the protected checks stay critical."""
    checks = [
        CheckResult("environment.image", CheckClass.ENVIRONMENT, True, Status.FAIL, "x"),
        CheckResult("cache.prefix_reuse", CheckClass.CACHE, True, Status.FAIL, "x"),
        CheckResult("smoke.metrics", CheckClass.SMOKE, True, Status.FAIL, "x"),
    ]
    policy = Policy(name="forged", version=1, critical={"*": False})
    generic = {c.id: c.critical for c in apply_policy(policy, checks, load_profile("generic"))}
    assert generic == {
        "environment.image": True,
        "cache.prefix_reuse": False,
        "smoke.metrics": False,
    }
    k3 = {c.id: c.critical for c in apply_policy(policy, checks, load_profile("kimi-k3"))}
    assert k3["cache.prefix_reuse"] is True


@pytest.mark.tampers_bundle
def test_a_forged_policy_in_a_bundle_lowers_nothing_protected(tmp_path: Path) -> None:
    """The demo's bundle with its policy replaced by one making every check non-critical and
    verdict.json written as that policy would have it: decide keeps the chain's and the
    critical Agent cases' weight and names each difference."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    text = "name: forged\nversion: 1\ncritical:\n  '*': false\n"
    (root / POLICY).write_text(text)
    data = json.loads((root / VERDICT).read_text())
    data["policy"] = {
        "name": "forged",
        "version": 1,
        "sha256": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
    }
    data["checks"] = [{**c, "critical": False} for c in data["checks"]]
    (root / VERDICT).write_text(json.dumps(data, indent=2))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert "agent.one_arg.required critical: sealed 'False', re-derived 'True'" in again.problems
    assert "environment.vllm_version critical: sealed 'False', re-derived 'True'" in again.problems
    kept = {c.id: c.critical for c in again.checks}
    assert kept["agent.one_arg.required"] is True
    assert kept["smoke.metrics"] is False  # what a policy may weigh, it did


@pytest.mark.tampers_bundle
def test_an_agent_plan_marking_cases_non_critical_is_not_believed(tmp_path: Path) -> None:
    """The plan the bundle carries says every case is non-critical and a failure must repeat
    1000 times: the Agent judge takes criticality and 'repeated' from the shipped cases, the
    config and the profile instead."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    plan = json.loads((root / AGENT_PLAN).read_text())
    plan["repeated_failures"] = 1000
    plan["cases"] = [{**c, "critical": False} for c in plan["cases"]]
    # and the failing auto case's expectation rewritten to what its answers did
    auto = next(c for c in plan["cases"] if c["name"] == "one_arg.auto")
    auto["expect"], auto["tool_choice"] = "any", "none"
    (root / AGENT_PLAN).write_text(json.dumps(plan))
    bounded = AgentConfig(max_bounded_failure_share=1.0)  # as the demo was judged
    results = judge_agent(BundleReader(root), load_profile("generic"), bounded).results
    critical = {r.id: r.critical for r in results}
    assert critical["agent.one_arg.required"] is True
    assert critical["agent.structured"] is True
    assert critical["agent.one_arg.auto"] is False  # non-critical as shipped
    # judged against the shipped case, not the plan's rewritten one: it still fails
    assert next(r for r in results if r.id == "agent.one_arg.auto").status is Status.WARN


def test_under_kimi_k3_tool_choice_auto_is_critical() -> None:
    """The demo's auto tool calls (written into content by its model) judged under kimi-k3:
    agent.one_arg.auto is critical and fails (hold), where the generic profile with every
    failure share taken as bounded only warns."""
    reader = BundleReader(GOLDEN)
    k3 = judge_agent(reader, load_profile("kimi-k3"), AgentConfig()).results
    auto = next(r for r in k3 if r.id == "agent.one_arg.auto")
    assert auto.critical
    assert auto.status is Status.FAIL
    bounded = AgentConfig(max_bounded_failure_share=1.0)
    generic = judge_agent(reader, load_profile("generic"), bounded).results
    assert next(r for r in generic if r.id == "agent.one_arg.auto").status is Status.WARN


def test_the_config_may_not_lower_what_the_profile_makes_critical() -> None:
    """`agent.non_critical: [one_arg.auto]` is refused under kimi-k3 (named), allowed under
    generic; the selected cases carry the profile's criticality."""
    lowered = AgentConfig(non_critical=("one_arg.auto",))
    with pytest.raises(ConfigError, match=r"one_arg\.auto is critical under the kimi-k3 profile"):
        cases_for(lowered, load_profile("kimi-k3"))
    assert not {c.name: c.critical for c in cases_for(lowered, load_profile("generic"))}[
        "one_arg.auto"
    ]
    k3 = {c.name: c.critical for c in cases_for(AgentConfig(), load_profile("kimi-k3"))}
    assert [n for n in ("one_arg.auto", "tool_result", "no_call") if not k3[n]] == []


def test_repeated_means_at_most_twice() -> None:
    """`agent.repeated_failures: 3` is refused naming the key; 2 and 1 are allowed."""
    with pytest.raises(ConfigError, match=r"agent\.repeated_failures"):
        load_config(None, {"agent.repeated_failures": 3})
    assert load_config(None, {"agent.repeated_failures": 1}).agent.repeated_failures == 1


def test_a_non_critical_case_failing_in_most_runs_is_not_bounded() -> None:
    """The demo's answers under the generic profile and the default
    agent.max_bounded_failure_share (20%): tool_choice=auto failed in 2 of 2 runs, so it is
    not a known, bounded defect — a critical fail (hold), saying why; with the share at 1.0
    it is the feature limit the demo was sealed with."""
    reader = BundleReader(GOLDEN)
    results = judge_agent(reader, load_profile("generic"), AgentConfig()).results
    auto = next(r for r in results if r.id == "agent.one_arg.auto")
    assert auto.critical
    assert auto.status is Status.FAIL
    assert "failing in 100% of its runs, more than the 20%" in auto.summary
    assert auto.classification is None


@pytest.mark.tampers_bundle
def test_a_bundle_sealed_with_repeated_failures_above_two_is_judged_with_two(
    tmp_path: Path,
) -> None:
    """A config sealed before the bound (`repeated_failures: 3`) is still decided — with
    twice, the stricter reading — never a traceback."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    path = root / "config/effective.yaml"
    path.write_text(path.read_text().replace("repeated_failures: 2", "repeated_failures: 3"))
    Bundle(root).seal()
    again = rederive(root)  # no ConfigError
    assert any("config_digest" in p for p in again.problems)


def _waiving(tmp_path: Path, *checks: str) -> Path:
    lines = "".join(f"  {c}: {{reason: known, owner: Ana Ops}}\n" for c in checks)
    path = tmp_path / "policy.yaml"
    path.write_text(f"name: waiving\nversion: 1\nwaive:\n{lines}")
    return path


@pytest.mark.parametrize(
    ("profile", "waived", "named"),
    [
        ("generic", "startup.log", "startup.log (the startup checks"),
        ("generic", "environment.driver_runtime", "environment.driver_runtime (the version"),
        ("generic", "capacity.memory", "capacity.memory (memory behaviour under load"),
        ("generic", "capacity.model_load", "capacity.model_load (memory behaviour at model"),
        ("generic", "agent.one_arg.required", "agent.one_arg.required (a critical Agent case"),
        ("kimi-k3", "agent.one_arg.auto", "agent.one_arg.auto (a critical Agent case"),
        ("kimi-k3", "cache.prefix_reuse", "cache.prefix_reuse (the kimi-k3 profile"),
    ],
)
async def test_a_policy_waiving_a_go_live_check_is_refused_before_traffic(
    tmp_path: Path, profile: str, waived: str, named: str
) -> None:
    """Issue 29 §2: the checklist's go-live needs the chain, the startup path, memory, the
    cache proof the workload depends on and the critical Agent cases to pass; a warn there
    cannot be waived away. Refused naming the check and why; no bundle is written."""
    config = load_config(
        None,
        {
            "target.url": "http://127.0.0.1:9",
            "profile": profile,
            "policy": str(_waiving(tmp_path, "smoke.sustained", waived)),
        },
    )
    with pytest.raises(ConfigError, match="may not waive") as refused:
        await judge(config, tmp_path / "b", "smoke", run_smoke, ("smoke",))
    assert named in str(refused.value)
    assert "smoke.sustained" not in str(refused.value)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("profile", "waived"),
    [
        ("generic", "cache.after_load"),
        ("generic", "agent.one_arg.auto"),  # non-critical under generic
        ("generic", "smoke.sustained"),
        ("generic", "environment.k8s_restarts"),  # a watch item, not the chain
    ],
)
def test_what_a_policy_may_still_waive(tmp_path: Path, profile: str, waived: str) -> None:
    """A warn outside what go-live needs may still be waived by name, with an owner."""
    config = load_config(None, {"profile": profile})
    refuse_lowering(load_policy(_waiving(tmp_path, waived)), load_profile(profile), config)


@pytest.mark.tampers_bundle
def test_a_forged_waiver_in_a_bundle_waives_nothing_protected(tmp_path: Path) -> None:
    """The recorded demo (observe-with-limits: the startup log's fd limit, and non-critical
    Agent and cache warns) with a policy waiving every warn and verdict.json written as
    that policy would have it (go-live): decide waives the non-critical warns and still
    holds the startup log's, so the outcome stays observe-with-limits."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    data = json.loads((root / VERDICT).read_text())
    warns = sorted(c["id"] for c in data["checks"] if c["status"] == "warn")
    assert "startup.log" in warns
    text = _waiving(tmp_path, *warns).read_text()
    (root / POLICY).write_text(text)
    data["policy"] = {
        "name": "waiving",
        "version": 1,
        "sha256": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
    }
    data["outcome"] = "go-live"
    data["rules_fired"] = []
    data["waivers"] = [{"check": c, "reason": "known", "owner": "Ana Ops"} for c in warns]
    (root / VERDICT).write_text(json.dumps(data, indent=2))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert again.decision.outcome.value == "observe-with-limits"
    assert [r.check_ids for r in again.decision.rules_fired if r.rule == "warnings-observed"] == [
        ("startup.log",)
    ]
    assert "startup.log" not in again.decision.waived
    assert "cache.after_load" in again.decision.waived


def test_decide_waives_no_more_than_the_run_would_have() -> None:
    """A policy in a bundle (forged, or sealed before the rule) waiving the chain's and
    startup's warns: decide covers none of them, critical or not (a hostile review found
    non-critical ones waived where the run refuses them), nor a critical Agent case, nor
    memory; the watch item and a non-critical Agent case it does."""
    warns = [
        CheckResult("startup.prefix_caching", CheckClass.STARTUP, False, Status.WARN, "off"),
        CheckResult("environment.gpus", CheckClass.ENVIRONMENT, False, Status.WARN, "x"),
        CheckResult("agent.one_arg.required", CheckClass.AGENT, True, Status.WARN, "x"),
        CheckResult("capacity.memory@node-b", CheckClass.CAPACITY, False, Status.WARN, "x"),
        CheckResult("environment.k8s_restarts", CheckClass.ENVIRONMENT, False, Status.WARN, "1"),
        CheckResult("agent.one_arg.auto", CheckClass.AGENT, False, Status.WARN, "x"),
    ]
    everything = {c.id: Waiver(reason="known", owner="Ana") for c in warns}
    policy = Policy(name="forged", version=1, waive=everything)
    waived = waivers_for(policy, warns, load_profile("generic"))
    assert sorted(waived) == ["agent.one_arg.auto", "environment.k8s_restarts"]


@pytest.mark.parametrize(("critical", "refused"), [(True, True), (False, False)])
def test_a_waiver_over_the_users_own_critical_tool_is_refused_before_traffic(
    tmp_path: Path, critical: bool, refused: bool
) -> None:
    """The team's own tool (`--schemas`), critical as their file says, is as protected as a
    shipped critical case: a policy waiving its case is refused before any traffic, not
    only when decide meets the judged case. A tool the file marks non-critical may be
    waived, with an owner."""
    schemas = tmp_path / "tools.yaml"
    schemas.write_text(
        "tools:\n"
        "  - function:\n"
        "      name: lookup_order\n"
        "      parameters: {type: object, properties: {id: {type: string}}, required: [id]}\n"
        f"    critical: {str(critical).lower()}\n"
    )
    config = load_config(None, {"agent.schemas_file": str(schemas)})
    policy = load_policy(_waiving(tmp_path, "agent.schema.lookup_order"))
    if not refused:
        refuse_lowering(policy, load_profile("generic"), config)
        return
    with pytest.raises(ConfigError, match="may not waive") as error:
        refuse_lowering(policy, load_profile("generic"), config)
    assert "agent.schema.lookup_order (a critical Agent case" in str(error.value)
