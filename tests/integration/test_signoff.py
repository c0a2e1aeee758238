"""After the run: the policy digest, `golive decide` re-deriving the sealed verdict, the
sign-off record and signature, and JUnit XML — on bundles from a fake server (the faults
are the fake's job; nothing here needs the real engine)."""

from __future__ import annotations

import asyncio
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.signing import SIGNATURE, load_public_key
from golive.bundle.store import Bundle, verify
from golive.cli.main import main
from golive.results import EXIT_USAGE, Outcome
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.keys import ed25519_keys
from tests.helpers.sections import PINNED_IMAGE, edits, pinned_image, programme_bundle


async def _smoke(out: Path, fault: str | None, *extra: str) -> int:
    async with fake_vllm(FakeState(fault=fault)) as url:
        args = ["smoke", "--target", url, "--out", str(out), "--json", *extra]
        config = out.parent / "config.yaml"
        config.write_text(
            "smoke: {classes: false}\n"
            "programme:\n  not_used:\n"
            "    - {part: smoke.classes, owner: api-team, reason: 'one text request only'}\n"
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


def _unhealthy(root: Path) -> None:
    """The recorded /health answer is a 503: the smoke section's first critical check fails."""
    records = root / "requests/smoke.jsonl"
    lines = records.read_text().splitlines()
    health = json.loads(lines[0])
    assert health["label"] == "health"
    health["http_status"] = 503
    records.write_text("\n".join([json.dumps(health), *lines[1:]]) + "\n")


async def test_a_programme_bundle_signs_and_becomes_the_rollback_artifact(
    tmp_path: Path, capsys: Any
) -> None:
    """A programme bundle of the real CPU vLLM's recorded run (observe-with-limits, every open
    item owned) re-derives, signs, re-seals and is registered as the rollback artifact with
    its launch evidence."""
    out = await programme_bundle(tmp_path / "b", pinned_image)
    verdict = _json(out / "verdict.json")
    assert verdict["outcome"] == "observe-with-limits"
    assert verdict["scope"] == "programme"
    assert await _cli("decide", str(out)) == 0
    capsys.readouterr()
    registry = tmp_path / "registry"
    argv = ["signoff", str(out), "--reviewer", "Ana Ops", "--outcome", "observe-with-limits"]
    assert await _cli(*argv, "--registry", str(registry)) == 0
    printed = capsys.readouterr().out
    assert "signed observe-with-limits by Ana Ops" in printed
    assert "registered as a rollback artifact" in printed
    assert await _cli("rollback", "show", "--registry", str(registry), "--json") == 0
    artifact = json.loads(capsys.readouterr().out)
    assert artifact["bundle"] == str(out.resolve())
    assert artifact["reviewer"] == "Ana Ops"
    assert artifact["launch_config_digest"].startswith("sha256:")  # startup log + container
    assert artifact["image_digest"] == PINNED_IMAGE.split("@")[1]
    assert artifact["runtime_source"] == "serving process 4242"
    signed = _json(out / "signoff.json")
    assert signed["signature"]["reviewer"] == "Ana Ops"
    assert signed["signature"]["taken_as_sealed"] == []
    assert signed["items"][16]["state"] == "ticked"
    assert "Signed **observe-with-limits** by Ana Ops" in (out / "signoff.md").read_text()
    assert verify(out).ok  # re-sealed
    assert await _cli("decide", str(out)) == 0
    # a signature is never replaced
    assert await _cli("signoff", str(out), "--reviewer", "Bo", "--outcome", "hold") == EXIT_USAGE


async def test_observe_with_limits_signs_only_with_every_warn_owned(
    tmp_path: Path, capsys: Any
) -> None:
    """A warn is a watch item: unowned, it blocks signing; owned in the config, it signs; and
    go-live over observe-with-limits needs an override reason."""
    unowned = await programme_bundle(tmp_path / "u", settings={"signoff.actions": []})
    verdict = _json(unowned / "verdict.json")
    assert verdict["outcome"] == "observe-with-limits"
    assert {a["owner"] for a in verdict["actions"]} == {"unassigned"}
    capsys.readouterr()
    argv = ["--reviewer", "Ana", "--outcome", "observe-with-limits", "--registry"]
    assert await _cli("signoff", str(unowned), *argv, str(tmp_path / "r")) == EXIT_USAGE
    refused = capsys.readouterr().err
    assert "unassigned: " in refused
    assert "startup.log" in refused
    owned = await programme_bundle(tmp_path / "o", pinned_image)
    assert await _cli("signoff", str(owned), *argv, str(tmp_path / "r")) == 0
    # signing go-live over observe-with-limits is an override and needs its reason
    again = await programme_bundle(tmp_path / "g")
    better = ["--reviewer", "Ana", "--outcome", "go-live"]
    assert await _cli("signoff", str(again), *better) == EXIT_USAGE


async def test_a_policy_waiver_is_named_in_the_verdict(tmp_path: Path) -> None:
    """A warn waived by the policy no longer holds the verdict back, and the verdict names the
    waiver with its reason and owner; the startup log's warn, which go-live needs passed, is
    still observed (a policy waiving it is refused: tests/decision/test_policy_limits.py)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "name: waive-after-load\nversion: 1\nwaive:\n  cache.after_load:\n"
        "    reason: the prompt cache is warmed again after each deploy\n"
        "    owner: Ana Ops\n"
    )
    out = await programme_bundle(tmp_path / "b", settings={"policy": str(policy)})
    verdict = _json(out / "verdict.json")
    assert verdict["waivers"] == [
        {
            "check": "cache.after_load",
            "reason": "the prompt cache is warmed again after each deploy",
            "owner": "Ana Ops",
        },
    ]
    observed = [r["checks"] for r in verdict["rules_fired"] if r["rule"] == "warnings-observed"]
    assert observed == [["startup.log"]]
    actions = [a["check"] for a in verdict["actions"]]
    assert "startup.log" in actions
    assert "cache.after_load" not in actions
    assert "waived" in (out / "report.md").read_text()
    assert await _cli("decide", str(out)) == 0  # it agrees with the seal


async def test_failing_bundle_needs_an_override_to_sign_go_live(
    tmp_path: Path, capsys: Any
) -> None:
    """A section bundle is never signed go-live; a programme bundle that holds is, only with a
    recorded override reason — and the registry keeps it as "accepted with override", never
    the default rollback target, even when it is the newest entry."""
    out = tmp_path / "b"
    junit = tmp_path / "junit.xml"
    code = await _smoke(out, "stale_metrics", "--junit", str(junit))
    assert code == Outcome.HOLD.exit_code
    verdict = _json(out / "verdict.json")
    action = next(a for a in verdict["actions"] if a["check"] == "smoke.metrics")
    assert action["owner"] == "sre-oncall"
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert any("smoke.metrics" in (f.text or "") or f.get("message") for f in failures)
    override = ["--override-reason", "health endpoint fixed out of band; see INC-42"]
    # a section bundle is never accepted, with or without a reason
    argv = ["signoff", str(out), "--reviewer", "Ana", "--outcome", "go-live"]
    assert await _cli(*argv, *override) == EXIT_USAGE
    # a programme bundle that holds: go-live only with a recorded reason
    held = await programme_bundle(tmp_path / "p", edits(_unhealthy, pinned_image))
    assert _json(held / "verdict.json")["outcome"] == "hold"
    registry = ["--registry", str(tmp_path / "registry")]
    # observe-with-limits, every item owned
    honest = await programme_bundle(tmp_path / "honest", pinned_image)
    signed = ["signoff", str(honest), "--reviewer", "Ana", "--outcome", "observe-with-limits"]
    assert await _cli(*signed, *registry) == 0
    argv = ["signoff", str(held), "--reviewer", "Ana", "--outcome", "go-live"]
    assert await _cli(*argv, *registry) == EXIT_USAGE
    assert await _cli(*argv, *registry, *override) == 0
    signature = _json(held / "signoff.json")["signature"]
    assert signature["verdict_outcome"] == "hold"
    assert "INC-42" in signature["override_reason"]
    assert signature["override"] is True
    assert "Accepted with override" in (held / "signoff.md").read_text()
    # two signatures in one second: the registry's file names (second, then a digest) do not
    # order them, so each entry is read by the bundle it names
    entries = [_json(e) for e in (tmp_path / "registry").glob("*.json")]
    by_bundle = {Path(e["bundle"]).name: e["accepted_with_override"] for e in entries}
    assert by_bundle == {honest.name: False, held.name: True}
    capsys.readouterr()
    assert await _cli("rollback", "show", *registry) == 0
    shown = capsys.readouterr().out
    assert f"last accepted: {honest.resolve()} (observe-with-limits" in shown
    assert f"accepted with override (never the rollback target): {held.resolve()}" in shown


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


@pytest.mark.tampers_bundle
async def test_a_deleted_tested_envelope_is_still_on_the_signed_sheet(
    tmp_path: Path, capsys: Any
) -> None:
    """A reviewer deletes `tested` from verdict.json and re-seals (older bundles have none,
    so decide cannot refuse it): the sign-off sheet still states the envelope the evidence
    gives, never "not stated"."""
    out = await programme_bundle(tmp_path / "b", pinned_image)
    verdict = _json(out / "verdict.json")
    stated = verdict.pop("tested")
    assert stated["max_concurrency"], stated  # the recorded run exercised an envelope
    (out / "verdict.json").write_text(json.dumps(verdict, indent=2))
    Bundle(out).seal()
    argv = ["signoff", str(out), "--reviewer", "Ana Ops", "--outcome", "observe-with-limits"]
    assert await _cli(*argv, "--registry", str(tmp_path / "registry")) == 0, capsys.readouterr()
    signed = _json(out / "signoff.json")
    assert signed["tested"] == stated
    assert "not stated" not in signed["tested_sentence"]
    assert f"concurrency up to {stated['max_concurrency']}" in (out / "signoff.md").read_text()


@pytest.mark.parametrize(
    ("container", "named"),
    [
        # the demo as recorded: a venv, no image
        ({}, "the image digest (the evidence names no digest"),
        # variables the probe read from its own process, not the server's
        (
            {"image_digests": [PINNED_IMAGE.split("@")[1]], "environment_source": "probe"},
            "the serving process's runtime variables (read from the probe",
        ),
        # no serving command and no startup log (hold: signed over it with a reason)
        (
            {"image_digests": [PINNED_IMAGE.split("@")[1]], "serve_command": []},
            "the launch configuration (neither the serving command",
        ),
    ],
)
async def test_an_accepted_deployment_a_rollback_cannot_reach_is_not_signed(
    tmp_path: Path, capsys: Any, container: dict[str, Any], named: str
) -> None:
    """Checklist: the rollback artifact is the accepted image and launch configuration with
    its runtime variables, never an untracked rebuild. A bundle lacking one is refused
    signing as accepted (exit 2, naming what it lacks and how to give it), before anything is
    written: no signature, nothing registered."""

    def recorded_as(root: Path) -> None:
        path = root / "environment/container.json"
        data = {**_json(path), **container}
        if "serve_command" in container:
            (root / "environment/startup.log").unlink()
        path.write_text(json.dumps(data))

    out = await programme_bundle(tmp_path / "b", recorded_as)
    before = (out / "signoff.json").read_bytes()
    registry = tmp_path / "registry"
    argv = ["signoff", str(out), "--reviewer", "Ana", "--outcome", "observe-with-limits"]
    if "serve_command" in container:
        argv += ["--override-reason", "the engine log is with the platform team"]
    assert await _cli(*argv, "--registry", str(registry)) == EXIT_USAGE
    refused = capsys.readouterr().err
    assert "cannot be the rollback artifact, so signing observe-with-limits is refused" in refused
    assert named in refused.replace("\n", " ")
    assert (out / "signoff.json").read_bytes() == before
    assert not registry.exists()
    assert verify(out).ok


async def test_an_unwritable_registry_signs_nothing_and_a_retry_succeeds(tmp_path: Path) -> None:
    """Issue 30 §5: `--registry` that cannot be written (a file stands there) refuses before
    the bundle is touched — exit 2, the manifest and signoff as they were — so the retry with
    a writable registry signs and registers it (it was once signed then refused for good)."""
    out = await programme_bundle(tmp_path / "b", pinned_image)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the registry would go\n")
    argv = ["signoff", str(out), "--reviewer", "Ana Ops", "--outcome", "observe-with-limits"]
    assert await _cli(*argv, "--registry", str(blocked / "registry")) == EXIT_USAGE
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert verify(out).ok
    assert await _cli(*argv, "--registry", str(tmp_path / "registry")) == 0
    assert _json(out / "signoff.json")["signature"]["reviewer"] == "Ana Ops"
    assert len(list((tmp_path / "registry").glob("*.json"))) == 1


async def test_a_disk_full_during_signing_leaves_the_bundle_signable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while signoff.json is written (its rename fails): the bundle is left as
    it was, with no temp file beside it, so it still verifies and the retry signs it."""
    out = await programme_bundle(tmp_path / "b", pinned_image)
    real = os.replace

    def full(src: Any, dst: Any) -> None:
        if str(dst).endswith("signoff.json"):
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr("golive.bundle.store.os.replace", full)
    argv = ["signoff", str(out), "--reviewer", "Ana Ops", "--outcome", "observe-with-limits"]
    registry = ["--registry", str(tmp_path / "registry")]
    assert await _cli(*argv, *registry) != 0
    assert verify(out).ok
    assert not list(out.glob(".*.tmp"))
    monkeypatch.setattr("golive.bundle.store.os.replace", real)
    assert await _cli(*argv, *registry) == 0
    assert _json(out / "signoff.json")["signature"]["reviewer"] == "Ana Ops"


async def test_cli_signs_at_seal_and_at_signoff(tmp_path: Path) -> None:
    """`--sign-key` on a judging command and on signoff; both verify with the public key."""
    private, public = ed25519_keys(tmp_path)
    out, out2 = tmp_path / "b", tmp_path / "b2"
    async with fake_vllm(FakeState(fault="odd_version")) as url:  # answers wrongly: hold
        argv = ["smoke", "--target", url, "--out", str(out), "--sign-key", str(private)]
        code = await asyncio.to_thread(main, argv)
        await asyncio.to_thread(main, ["smoke", "--target", url, "--out", str(out2)])
    assert code == 11
    assert verify(out, load_public_key(public)).ok
    signoff = ["signoff", str(out), "--reviewer", "R", "--outcome", "hold"]
    assert await asyncio.to_thread(main, signoff) == 0
    assert not (out / SIGNATURE).exists()
    assert not verify(out, load_public_key(public)).ok
    signoff = [
        "signoff",
        str(out2),
        "--reviewer",
        "R",
        "--outcome",
        "hold",
        "--sign-key",
        str(private),
    ]
    assert await asyncio.to_thread(main, signoff) == 0
    assert verify(out2, load_public_key(public)).ok
