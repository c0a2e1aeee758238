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

from golive.bundle import verify
from golive.cli import main
from golive.results import EXIT_USAGE, Outcome
from tests.fakes.vllm import FakeState, fake_vllm


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


async def test_healthy_bundle_signs_and_decides(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "b"
    junit = tmp_path / "junit.xml"
    code = await _smoke(out, None, "--junit", str(junit))
    assert code == 0
    verdict = _json(out / "verdict.json")
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
    assert (tmp_path / "r/report.md").read_text().startswith("# golive verdict: **go-live**")
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
    assert (
        await _cli(
            "signoff",
            str(out),
            "--reviewer",
            "Ana Ops",
            "--outcome",
            "go-live",
            "--registry",
            str(registry),
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "signed go-live by Ana Ops" in printed
    assert "registered as a rollback artifact" in printed
    assert await _cli("rollback", "show", "--registry", str(registry), "--json") == 0
    artifact = json.loads(capsys.readouterr().out)
    assert artifact["bundle"] == str(out.resolve())
    assert artifact["reviewer"] == "Ana Ops"
    assert artifact["launch_config_digest"].startswith("sha256:")
    signed = _json(out / "signoff.json")
    assert signed["signature"]["reviewer"] == "Ana Ops"
    assert signed["items"][16]["state"] == "ticked"
    assert "Signed **go-live** by Ana Ops" in (out / "signoff.md").read_text()
    assert verify(out).ok  # re-sealed
    assert await _cli("decide", str(out)) == 0
    # a signature is never replaced
    assert await _cli("signoff", str(out), "--reviewer", "Bo", "--outcome", "hold") == EXIT_USAGE


async def test_failing_bundle_needs_an_override_to_sign_go_live(tmp_path: Path) -> None:
    out = tmp_path / "b"
    junit = tmp_path / "junit.xml"
    code = await _smoke(out, "stale_metrics", "--junit", str(junit))
    assert code == Outcome.HOLD.exit_code
    verdict = _json(out / "verdict.json")
    action = next(a for a in verdict["actions"] if a["check"] == "smoke.metrics")
    assert action["owner"] == "sre-oncall"
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert any("smoke.metrics" in (f.text or "") or f.get("message") for f in failures)
    assert (
        await _cli("signoff", str(out), "--reviewer", "Ana", "--outcome", "go-live") == EXIT_USAGE
    )
    assert (
        await _cli(
            "signoff",
            str(out),
            "--reviewer",
            "Ana",
            "--outcome",
            "go-live",
            "--override-reason",
            "metrics exporter fixed out of band; see INC-42",
        )
        == 0
    )
    signature = _json(out / "signoff.json")["signature"]
    assert signature["verdict_outcome"] == "hold"
    assert "INC-42" in signature["override_reason"]


async def test_decide_notices_a_tampered_verdict(tmp_path: Path, capsys: Any) -> None:
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
    assert result["outcome"] == "go-live"
    assert result["sealed"] == "hold"
    assert any("manifest" in p for p in result["problems"])
    assert await _cli("signoff", str(out), "--reviewer", "Ana", "--outcome", "hold") == EXIT_USAGE


async def test_policy_file_changes_weight_and_is_recorded(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: lenient-metrics\nversion: 3\ncritical:\n  'smoke.metrics': false\n")
    out = tmp_path / "b"
    code = await _smoke(out, "stale_metrics", "--policy", str(policy))
    verdict = _json(out / "verdict.json")
    assert code == 0, verdict["rules_fired"]
    assert verdict["policy"]["name"] == "lenient-metrics"
    assert verdict["policy"]["version"] == 3
    assert (out / "config/policy.yaml").read_text() == policy.read_text()
    assert await _cli("decide", str(out)) == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [("version: 1\n", "name"), ("name: x\nversion: 0\n", "version"), ("name: [\n", "YAML")],
)
async def test_bad_policy_is_a_usage_error(tmp_path: Path, text: str, needle: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    code = await _smoke(tmp_path / "b", None, "--policy", str(policy))
    assert code == EXIT_USAGE
