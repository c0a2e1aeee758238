"""Issue 29 §1: a deployment serving Kimi K3 is judged as one.

Under the generic profile no image, CUDA, driver, parser or GPU count is asserted, so a Kimi K3
deployment (served under an alias, its `/v1/models` root naming the model) passed smoke as a
section and could reach go-live. golive recognises Kimi K3 and holds unless the run names the
kimi-k3 profile or says why it is not Kimi K3 (`--not-k3 "REASON"`, recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.bundle.layout import VERDICT
from golive.bundle.store import Bundle
from golive.checks.smoke.collect import run_smoke
from golive.cli.main import main
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.profiles import profile_text as load_profile_text
from golive.results import Outcome
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import TEXT_ONLY

K3_ROOT = "moonshotai/Kimi-K3"


async def _smoke(out: Path, root: str | None, **overrides: object) -> Verdict:
    async with fake_vllm(FakeState(root=root)) as url:
        settings = {"target.url": url, **TEXT_ONLY, **overrides}
        return await judge(load_config(None, settings), out, "smoke", run_smoke, ("smoke",))


def _check(verdict: Verdict, check_id: str) -> dict[str, object]:
    return next(c for c in verdict.data["checks"] if c["id"] == check_id)


async def test_kimi_k3_behind_an_alias_under_the_generic_profile_holds(tmp_path: Path) -> None:
    """Served as `fake-model`, its root names Kimi K3: every smoke check passes, and the
    verdict holds on the critical `target.profile`, saying which flag to run with."""
    verdict = await _smoke(tmp_path / "b", K3_ROOT)
    check = _check(verdict, "target.profile")
    assert check["status"] == "fail"
    assert check["critical"] is True
    assert f"/v1/models root {K3_ROOT!r}" in str(check["summary"])
    assert "run with --profile kimi-k3" in str(check["summary"])
    assert verdict.outcome is Outcome.HOLD
    assert all(c["status"] == "pass" for c in verdict.data["checks"] if c["id"] != check["id"])


async def test_another_model_gets_no_profile_check(tmp_path: Path) -> None:
    """The control: a model that is not Kimi K3 (root `Qwen/Qwen3-0.6B`) is judged under the
    generic profile as before, with no target.profile check."""
    verdict = await _smoke(tmp_path / "b", "Qwen/Qwen3-0.6B")
    assert verdict.outcome is Outcome.SECTION_PASSED
    assert "target.profile" not in {c["id"] for c in verdict.data["checks"]}


async def test_not_k3_with_a_reason_is_recorded_and_judged(tmp_path: Path) -> None:
    """`--not-k3 "REASON"`: the section passes, and the reason is in the check (hence the
    report) and in the effective config the bundle keeps."""
    reason = "a distilled model under the K3 name; owner: ml-platform"
    verdict = await _smoke(tmp_path / "b", K3_ROOT, not_k3=reason)
    check = _check(verdict, "target.profile")
    assert check["status"] == "pass"
    assert reason in str(check["summary"])
    assert verdict.outcome is Outcome.SECTION_PASSED
    assert reason in (tmp_path / "b/config/effective.yaml").read_text()
    assert reason in (tmp_path / "b/report.md").read_text()


async def test_under_the_kimi_k3_profile_the_check_passes(tmp_path: Path) -> None:
    """The same server judged under --profile kimi-k3: target.profile passes."""
    verdict = await _smoke(tmp_path / "b", K3_ROOT, profile="kimi-k3")
    assert _check(verdict, "target.profile")["status"] == "pass"


async def test_a_profile_calling_itself_kimi_k3_is_refused(tmp_path: Path) -> None:
    """A custom profile file that calls itself kimi-k3 but drops the recipe's CUDA 13 and
    parser is refused before any traffic (decide would judge it as the bundled kimi-k3)."""
    custom = tmp_path / "k3-lite.yaml"
    custom.write_text(
        "name: kimi-k3\ndescription: lite\nchain:\n  tool_parser: hermes\n  min_gpus: 1\n"
    )
    with pytest.raises(ConfigError, match="calls itself 'kimi-k3', a bundled profile"):
        await _smoke(tmp_path / "b", K3_ROOT, profile=str(custom))
    assert not (tmp_path / "b").exists()


async def test_a_custom_profile_that_asserts_less_holds_naming_the_gaps(tmp_path: Path) -> None:
    """A custom profile under its own name with the recipe's parser but no CUDA or GPU floor:
    held, naming the first of what it asserts less."""
    custom = tmp_path / "k3-lite.yaml"
    custom.write_text(
        "name: k3-lite\ndescription: lite\nchain:\n  tool_parser: hermes\n  min_gpus: 1\n"
    )
    verdict = await _smoke(tmp_path / "b", K3_ROOT, profile=str(custom))
    check = _check(verdict, "target.profile")
    assert check["status"] == "fail"
    assert "judged under the k3-lite profile, which asserts less than the recipe" in str(
        check["summary"]
    )
    assert "chain.tool_parser: 'hermes', the recipe's 'kimi_k3'" in str(check["summary"])
    gaps = str(check["measurements"]["profile_gaps"])  # type: ignore[index]
    assert "chain.cuda_major: None, the recipe's 13" in gaps
    assert verdict.outcome is Outcome.HOLD


@pytest.mark.tampers_bundle
async def test_dropping_the_check_and_resealing_is_caught(tmp_path: Path) -> None:
    """A reviewer deletes target.profile from verdict.json, writes section-passed and re-seals:
    decide judges the records again, finds Kimi K3 and holds."""
    out = tmp_path / "b"
    await _smoke(out, K3_ROOT)
    data = json.loads((out / VERDICT).read_text())
    data["checks"] = [c for c in data["checks"] if c["id"] != "target.profile"]
    data.update(outcome="section-passed", exit_code=0, rules_fired=[], actions=[])
    (out / VERDICT).write_text(json.dumps(data, indent=2))
    Bundle(out).seal()
    again = rederive(out)
    assert not again.agrees
    assert again.decision.outcome is Outcome.HOLD
    assert any(p.startswith("target.profile") for p in again.problems), again.problems


@pytest.mark.tampers_bundle
async def test_the_kimi_k3_profile_copied_in_as_generic_is_judged_as_generic(
    tmp_path: Path,
) -> None:
    """A reviewer replaces config/profile.yaml with the kimi-k3 text renamed `generic` (so the
    Kimi K3 check would see a profile asserting the recipe): a copy naming a bundled profile
    is judged as the bundled one, and the edit is named."""
    out = tmp_path / "b"
    await _smoke(out, K3_ROOT)
    text = load_profile_text("kimi-k3").replace("name: kimi-k3", "name: generic", 1)
    (out / "config/profile.yaml").write_text(text)
    Bundle(out).seal()
    again = rederive(out)
    assert again.decision.outcome is Outcome.HOLD
    assert any("names the bundled 'generic' profile but differs" in p for p in again.problems)


def test_the_cli_takes_not_k3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--not-k3` is a flag of the judging commands; its help names the config key."""
    with pytest.raises(SystemExit):
        main(["smoke", "--help"])
    text = capsys.readouterr().out
    assert "--not-k3 REASON" in text
    assert "config not_k3" in text


def test_a_blank_not_k3_reason_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--not-k3 " "` is no reason: refused before any traffic as a config error naming the
    key, never recorded as one (issue 29 §1)."""
    code = main(
        ["smoke", "--target", "http://127.0.0.1:9", "--not-k3", "  ", "--out", str(tmp_path / "b")]
    )
    assert code == 2
    assert "not_k3" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
