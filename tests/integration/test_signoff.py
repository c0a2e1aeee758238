"""After the run: the policy digest, `golive decide` re-deriving the sealed verdict, the
sign-off record and signature, and JUnit XML — on bundles from a fake server (the faults
are the fake's job; nothing here needs the real engine)."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import verify
from golive.checks.context import CheckContext
from golive.cli.main import main
from golive.config import load_config
from golive.pipeline import Verdict, judge
from golive.results import EXIT_USAGE, CheckClass, CheckResult, Outcome, Status
from golive.verdict.scope import CAPACITY_PHASES, PROGRAMME
from tests.helpers.fakes.vllm import FakeState, fake_vllm


async def _smoke(out: Path, fault: str | None, *extra: str) -> int:
    async with fake_vllm(FakeState(fault=fault)) as url:
        args = ["smoke", "--target", url, "--out", str(out), "--json", *extra]
        config = out.parent / "config.yaml"
        config.write_text(
            "smoke: {classes: false}\n"
            "signoff:\n  actions:\n"
            "    - {match: 'smoke.metrics', owner: sre-oncall, deadline: '2026-12-15',"
            " rollback: 'keep the previous image'}\n"
        )
        return await asyncio.to_thread(main, [*args, "--config", str(config)])


async def _cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


async def test_a_section_bundle_decides_but_is_never_signed_as_accepted(
    tmp_path: Path, capsys: Any
) -> None:
    """A healthy smoke section is `section-passed` (exit 0); signing it go-live or
    observe-with-limits is refused and nothing enters the rollback registry."""
    out = tmp_path / "b"
    junit = tmp_path / "junit.xml"
    code = await _smoke(out, None, "--junit", str(junit))
    assert code == 0
    verdict = _json(out / "verdict.json")
    assert verdict["outcome"] == "section-passed"
    assert verdict["scope"] == ["smoke"]
    assert verdict["policy"]["name"] == "golive-default"
    assert verdict["policy"]["sha256"].startswith("sha256:")
    # JUnit: every check a testcase, none failed
    suites = ET.parse(junit).getroot()
    assert suites.get("failures") == "0"
    assert len(suites.findall(".//testcase")) == len(verdict["checks"])
    # decide agrees with the sealed verdict; the report renders anew outside the bundle
    assert await _cli("decide", str(out)) == 0
    assert await _cli("report", str(out), "-o", str(tmp_path / "r")) == 0
    assert "golive smoke: <span" in (tmp_path / "r/report.html").read_text()
    report = (tmp_path / "r/report.md").read_text()
    assert report.startswith("# golive verdict: **section-passed**")
    assert "still missing before a go-live decision: env, capacity, cache, agent" in report
    # sign-off record: 17 items, the smoke bundle cannot tick capacity items
    record = _json(out / "signoff.json")
    assert len(record["items"]) == 17
    states = {i["number"]: i["state"] for i in record["items"]}
    assert states[7] == "missing"
    assert states[16] == "ticked"
    assert states[17] == "missing"
    assert len(record["evidence_package"]) == 9
    capsys.readouterr()
    registry = tmp_path / "registry"
    for outcome in ("go-live", "observe-with-limits"):
        argv = ["signoff", str(out), "--reviewer", "Ana", "--outcome", outcome]
        assert await _cli(*argv, "--registry", str(registry)) == EXIT_USAGE
        assert "holds sections only (smoke)" in capsys.readouterr().err
    assert not registry.exists()
    assert verify(out).ok  # a refused signature leaves the bundle as sealed


async def _programme(
    out: Path, checks: list[CheckResult], settings: dict[str, Any] | None = None
) -> Verdict:
    """A sealed programme bundle from given results: the sign-off is offline logic over a
    bundle, so its rules are tested on bundles whose verdict is known in advance."""

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return list(checks)

    config = load_config(None, settings or {})
    return await judge(config, out, "run", programme, PROGRAMME, require_target=False)


def _passed(check_id: str, cls: CheckClass) -> CheckResult:
    return CheckResult(check_id, cls, True, Status.PASS, f"{check_id} passed")


PROGRAMME_PASSED = [
    _passed("environment.vllm_version", CheckClass.ENVIRONMENT),
    _passed("startup.log", CheckClass.STARTUP),
    _passed("smoke.health", CheckClass.SMOKE),
    *(_passed(p, CheckClass.CAPACITY) for p in CAPACITY_PHASES),
    _passed("cache.prefix_reuse", CheckClass.CACHE),
    _passed("agent.one_arg.required", CheckClass.AGENT),
]


async def test_a_programme_bundle_signs_go_live_and_becomes_the_rollback_artifact(
    tmp_path: Path, capsys: Any
) -> None:
    """A go-live programme bundle re-derives, signs, re-seals and is registered as the rollback
    artifact."""
    out = tmp_path / "b"
    verdict = await _programme(out, PROGRAMME_PASSED)
    assert verdict.outcome is Outcome.GO_LIVE
    assert verdict.data["scope"] == "programme"
    assert await _cli("decide", str(out)) == 0
    capsys.readouterr()
    registry = tmp_path / "registry"
    argv = ["signoff", str(out), "--reviewer", "Ana Ops", "--outcome", "go-live"]
    assert await _cli(*argv, "--registry", str(registry)) == 0
    printed = capsys.readouterr().out
    assert "signed go-live by Ana Ops" in printed
    assert "registered as a rollback artifact" in printed
    assert await _cli("rollback", "show", "--registry", str(registry), "--json") == 0
    artifact = json.loads(capsys.readouterr().out)
    assert artifact["bundle"] == str(out.resolve())
    assert artifact["reviewer"] == "Ana Ops"
    assert artifact["launch_config_digest"] is None  # no launch evidence here: none invented
    signed = _json(out / "signoff.json")
    assert signed["signature"]["reviewer"] == "Ana Ops"
    assert signed["items"][16]["state"] == "ticked"
    assert "Signed **go-live** by Ana Ops" in (out / "signoff.md").read_text()
    assert verify(out).ok  # re-sealed
    assert await _cli("decide", str(out)) == 0
    # a signature is never replaced
    assert await _cli("signoff", str(out), "--reviewer", "Bo", "--outcome", "hold") == EXIT_USAGE


async def test_observe_with_limits_signs_only_with_every_warn_owned(
    tmp_path: Path, capsys: Any
) -> None:
    """A warn is a watch item: unowned, it blocks signing; owned in the config, it signs."""
    warned = CheckResult("smoke.text", CheckClass.SMOKE, True, Status.WARN, "slow first token")
    unowned = await _programme(tmp_path / "u", [*PROGRAMME_PASSED, warned])
    assert unowned.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert unowned.data["actions"] == [
        {
            "check": "smoke.text",
            "owner": "unassigned",
            "deadline": "unassigned",
            "rollback": "unassigned",
            "status": "warn",
        }
    ]
    capsys.readouterr()
    argv = ["--reviewer", "Ana", "--outcome", "observe-with-limits", "--registry"]
    assert await _cli("signoff", str(tmp_path / "u"), *argv, str(tmp_path / "r")) == EXIT_USAGE
    assert "unassigned: smoke.text" in capsys.readouterr().err
    owner = {"match": "smoke.*", "owner": "sre", "deadline": "2026-12-15", "rollback": "v0.31"}
    owned = await _programme(
        tmp_path / "o", [*PROGRAMME_PASSED, warned], {"signoff.actions": [owner]}
    )
    assert await _cli("signoff", str(tmp_path / "o"), *argv, str(tmp_path / "r")) == 0
    # signing go-live over observe-with-limits is an override and needs its reason
    better = ["--reviewer", "Ana", "--outcome", "go-live"]
    again = await _programme(
        tmp_path / "g", [*PROGRAMME_PASSED, warned], {"signoff.actions": [owner]}
    )
    assert again.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert await _cli("signoff", str(tmp_path / "g"), *better) == EXIT_USAGE
    assert owned.outcome is Outcome.OBSERVE_WITH_LIMITS


async def test_a_policy_waiver_is_named_in_the_verdict(tmp_path: Path) -> None:
    """A warn waived by the policy lets go-live stand, and the verdict names the waiver with its
    reason and owner."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "name: waive-slow-ttft\nversion: 1\nwaive:\n  smoke.text:\n"
        "    reason: first-token latency is agreed with the product owner\n"
        "    owner: Ana Ops\n"
    )
    warned = CheckResult("smoke.text", CheckClass.SMOKE, True, Status.WARN, "slow first token")
    verdict = await _programme(tmp_path / "b", [*PROGRAMME_PASSED, warned], {"policy": str(policy)})
    assert verdict.outcome is Outcome.GO_LIVE
    assert verdict.data["waivers"] == [
        {
            "check": "smoke.text",
            "reason": "first-token latency is agreed with the product owner",
            "owner": "Ana Ops",
        }
    ]
    assert verdict.data["actions"] == []
    assert "waived" in (tmp_path / "b/report.md").read_text()
    assert await _cli("decide", str(tmp_path / "b")) == 0


async def test_failing_bundle_needs_an_override_to_sign_go_live(tmp_path: Path) -> None:
    """A section bundle is never signed go-live; a programme bundle that holds is, only with a
    recorded override reason."""
    out = tmp_path / "b"
    junit = tmp_path / "junit.xml"
    code = await _smoke(out, "stale_metrics", "--junit", str(junit))
    assert code == Outcome.HOLD.exit_code
    verdict = _json(out / "verdict.json")
    action = next(a for a in verdict["actions"] if a["check"] == "smoke.metrics")
    assert action["owner"] == "sre-oncall"
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert any("smoke.metrics" in (f.text or "") or f.get("message") for f in failures)
    override = ["--override-reason", "metrics exporter fixed out of band; see INC-42"]
    # a section bundle is never accepted, with or without a reason
    argv = ["signoff", str(out), "--reviewer", "Ana", "--outcome", "go-live"]
    assert await _cli(*argv, *override) == EXIT_USAGE
    # a programme bundle that holds: go-live only with a recorded reason
    failed = CheckResult("smoke.metrics", CheckClass.SMOKE, True, Status.FAIL, "stale counters")
    owner = {"match": "smoke.*", "owner": "sre", "deadline": "2026-12-15", "rollback": "v0.31"}
    held = await _programme(
        tmp_path / "p", [*PROGRAMME_PASSED, failed], {"signoff.actions": [owner]}
    )
    assert held.outcome is Outcome.HOLD
    argv = ["signoff", str(tmp_path / "p"), "--reviewer", "Ana", "--outcome", "go-live"]
    registry = ["--registry", str(tmp_path / "registry")]
    assert await _cli(*argv, *registry) == EXIT_USAGE
    assert await _cli(*argv, *registry, *override) == 0
    signature = _json(tmp_path / "p/signoff.json")["signature"]
    assert signature["verdict_outcome"] == "hold"
    assert "INC-42" in signature["override_reason"]


@pytest.mark.tampers_bundle
async def test_decide_notices_a_tampered_verdict(tmp_path: Path, capsys: Any) -> None:
    """Statuses edited into verdict.json do not survive golive decide: the evidence is judged again
    and still says hold."""
    out = tmp_path / "b"
    assert await _smoke(out, "stale_metrics") == Outcome.HOLD.exit_code
    assert await _cli("decide", str(out)) == 0
    data = _json(out / "verdict.json")
    for check in data["checks"]:
        check["status"] = "pass"
    (out / "verdict.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert await _cli("decide", str(out), "--json") == 1
    result = json.loads(capsys.readouterr().out)
    # the smoke checks are judged again from the saved answers and scrapes: the statuses
    # edited into verdict.json do not survive, the evidence still says hold
    assert result["outcome"] == "hold"
    assert result["sealed"] == "hold"
    assert any("manifest" in p for p in result["problems"])
    assert any(p.startswith("smoke.metrics status: sealed 'pass'") for p in result["problems"])
    assert await _cli("signoff", str(out), "--reviewer", "Ana", "--outcome", "hold") == EXIT_USAGE


async def test_policy_file_changes_weight_and_is_recorded(tmp_path: Path) -> None:
    """A policy making a failed check non-critical gives observe-with-limits naming it, and the
    policy's name, version and text are in the bundle."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: lenient-metrics\nversion: 3\ncritical:\n  'smoke.metrics': false\n")
    out = tmp_path / "b"
    code = await _smoke(out, "stale_metrics", "--policy", str(policy))
    verdict = _json(out / "verdict.json")
    # a non-critical failure is not a silent pass: observe-with-limits, naming it
    assert code == Outcome.OBSERVE_WITH_LIMITS.exit_code, verdict["rules_fired"]
    assert verdict["rules_fired"][0]["checks"] == ["smoke.metrics"]
    assert verdict["policy"]["name"] == "lenient-metrics"
    assert verdict["policy"]["version"] == 3
    assert (out / "config/policy.yaml").read_text() == policy.read_text()
    assert await _cli("decide", str(out)) == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [("version: 1\n", "name"), ("name: x\nversion: 0\n", "version"), ("name: [\n", "YAML")],
)
async def test_bad_policy_is_a_usage_error(tmp_path: Path, text: str, needle: str) -> None:
    """A malformed policy file is a usage error before any request is sent."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    code = await _smoke(tmp_path / "b", None, "--policy", str(policy))
    assert code == EXIT_USAGE
