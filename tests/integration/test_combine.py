"""`golive decide --combine`: sealed section bundles of one deployment make one programme
decision; bundles of different deployments, stale or altered bundles are refused by name.

The parts are section bundles made from the real CPU vLLM's recorded demo (each holds its
section's evidence and is judged from it: tests/helpers/sections.py); the live engine's
sections are combined in tests/target/test_programme_combine.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import verify
from golive.cli.main import main
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.combine import combine
from golive.orchestration.rederive import rederive
from golive.results import EXIT_USAGE, Outcome
from golive.verdict.document import VerdictDocument
from tests.helpers.sections import (
    GOLDEN,
    SECTIONS,
    Edit,
    all_sections,
    no_cache_reuse,
    section_bundle,
)

GOLDEN_VERDICT = VerdictDocument.read(GOLDEN)


def _edit_version(root: Path) -> None:
    """The smoke part's live /version says 0.31.0: another engine answered that section."""
    for name in ("smoke", "identity"):
        records = root / f"requests/{name}.jsonl"
        text = records.read_text()
        assert '"version": "0.32.0"' in text
        records.write_text(text.replace('"version": "0.32.0"', '"version": "0.31.0"'))


async def test_the_recorded_demo_in_five_sections_combines_to_its_own_decision(
    tmp_path: Path,
) -> None:
    """The demo's run split into five section bundles (each judged from its own evidence)
    combines into one programme bundle with the demo's own outcome and rules, keeps each part
    whole, and re-derives from the parts."""
    parts = await all_sections(tmp_path / "parts")
    for part in parts:
        assert rederive(part).agrees
    verdict = combine(parts, tmp_path / "combined", load_config(None, {}))
    assert verdict.outcome is GOLDEN_VERDICT.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert [r["rule"] for r in verdict.data["rules_fired"]] == [
        r.rule for r in GOLDEN_VERDICT.rules_fired
    ]
    assert verdict.data["scope"] == "programme"
    assert [p["scope"] for p in verdict.data["parts"]] == [[s] for s in SECTIONS]
    for cited, part in zip(verdict.data["parts"], parts, strict=True):
        assert cited["manifest_sha256"].startswith("sha256:")
        assert verify(tmp_path / "combined" / cited["dir"]).ok  # each part is kept whole
        assert cited["bundle"] == str(part.resolve())
    assert verify(tmp_path / "combined").ok
    again = rederive(tmp_path / "combined")
    assert again.agrees, again.problems
    assert again.as_sealed == ()  # every combined check judged again from its part


async def test_a_combined_programme_decides_by_the_same_rules(tmp_path: Path) -> None:
    """A combined bundle is decided by the same rules as golive run: a cache part whose engine
    counters show no reuse holds ("cache not accepted"); two parts are only a section result."""
    parts = await all_sections(tmp_path / "parts", {"cache": no_cache_reuse})
    verdict = combine(parts, tmp_path / "combined", load_config(None, {}))
    assert verdict.outcome is Outcome.HOLD
    held = {r["rule"]: r["checks"] for r in verdict.data["rules_fired"]}
    assert "cache.prefix_reuse" in held["critical-failure"]
    partial = combine(parts[:2], tmp_path / "partial", load_config(None, {}))
    assert partial.data["scope"] == ["env", "smoke"]
    assert partial.outcome is not Outcome.GO_LIVE


async def test_parts_of_different_deployments_are_refused(tmp_path: Path) -> None:
    """Parts that describe different deployments (another vLLM answered the smoke section,
    another served model in the agent section) are refused, naming what differs, and nothing
    is written."""
    await _refused(
        tmp_path / "v", {"smoke": _edit_version}, {}, "different deployments: vllm_version"
    )
    # the agent part asked for a model the server does not serve: which one it measured is
    # unknown there, and known in every other part
    await _refused(
        tmp_path / "m",
        {},
        {"target.model": "other-model"},
        "model is known in env, smoke, capacity, cache but not in agent",
    )


async def _refused(
    tmp_path: Path, edits: dict[str, Edit], agent_settings: dict[str, Any], phrase: str
) -> None:
    parts = [
        await section_bundle(
            tmp_path / s, s, edits.get(s), agent_settings if s == "agent" else None
        )
        for s in SECTIONS
    ]
    with pytest.raises(ConfigError) as info:
        combine(parts, tmp_path / "combined", load_config(None, {}))
    assert phrase in str(info.value)
    assert not (tmp_path / "combined").exists()


@pytest.mark.tampers_bundle
async def test_stale_duplicated_or_altered_parts_are_refused(tmp_path: Path) -> None:
    """A part older than the allowed age, a section given twice, or an altered part is refused with
    the reason."""
    parts = await all_sections(tmp_path / "parts")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=8)
    with pytest.raises(ConfigError, match="older than 7 days"):
        combine(parts, tmp_path / "c1", load_config(None, {}), now=later)
    again = await section_bundle(tmp_path / "again", "smoke")
    with pytest.raises(ConfigError, match="section smoke is in both"):
        combine([*parts, again], tmp_path / "c2", load_config(None, {}))
    checks = parts[1] / "verdict.json"
    checks.write_text(checks.read_text().replace('"fail"', '"pass"') + " ")
    with pytest.raises(ConfigError, match="does not match its manifest"):
        combine(parts, tmp_path / "c3", load_config(None, {}))


async def test_cli_combine_and_its_usage_errors(tmp_path: Path, capsys: Any) -> None:
    """golive decide --combine prints the combined outcome; a missing --out or a programme bundle as
    a part is a usage error."""
    parts = [str(p) for p in await all_sections(tmp_path / "parts")]
    out = tmp_path / "combined"
    argv = ["decide", "--combine", *parts, "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == Outcome.OBSERVE_WITH_LIMITS.exit_code
    assert "combined 5 bundles: observe-with-limits" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["decide", "--combine", *parts]) == EXIT_USAGE
    assert "--out DIR" in capsys.readouterr().err
    programme = await asyncio.to_thread(
        main, ["decide", "--combine", str(out), "--out", str(tmp_path / "x")]
    )
    assert programme == EXIT_USAGE  # a programme bundle is not a section


def _restarted(root: Path) -> None:
    """The engine process behind this part started later than the others' (a restart)."""
    for path in (root / "metrics").glob("*.prom"):
        text = path.read_text()
        path.write_text(
            re.sub(r"^(process_start_time_seconds) \S+$", r"\1 1.9e+09", text, flags=re.M)
        )


def _no_identity(root: Path) -> None:
    """A part made before every section asked /version and /v1/models when it started."""
    (root / "requests/identity.jsonl").unlink()


async def test_a_restart_between_sections_is_named(tmp_path: Path) -> None:
    """The cache section measured an engine process that started after the others did: the
    parts are refused, naming the restart and which sections saw which process."""
    parts = await all_sections(tmp_path / "parts", {"cache": _restarted})
    with pytest.raises(ConfigError) as info:
        combine(parts, tmp_path / "combined", load_config(None, {}))
    message = str(info.value)
    assert "the server restarted between env, smoke, capacity, agent (process started" in message
    assert "and cache (process started 1900000000)" in message


async def test_an_identity_unknown_in_a_part_needs_a_recorded_assumption(
    tmp_path: Path, capsys: Any
) -> None:
    """A capacity part that never asked /version (so its vLLM version is unknown) is refused;
    --assume-same-deployment REASON combines it and records the reason and what was unknown
    in verdict.json and the report."""
    parts = [str(p) for p in await all_sections(tmp_path / "parts", {"capacity": _no_identity})]
    out = tmp_path / "combined"
    argv = ["decide", "--combine", *parts, "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == EXIT_USAGE
    assert "vllm_version is known in env, smoke, cache, agent but not in capacity" in (
        capsys.readouterr().err
    )
    reason = "one pod, ran back to back; see the deploy log INC-7"
    assumed = [*argv, "--assume-same-deployment", reason]
    assert await asyncio.to_thread(main, assumed) == Outcome.OBSERVE_WITH_LIMITS.exit_code
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["assumed_same_deployment"]["reason"] == reason
    assert "vllm_version" in verdict["assumed_same_deployment"]["unknown_in_some_parts"]
    assert verdict["identity"]["vllm_version"] == "0.32.0"
    assert "assumed one deployment" in (out / "report.md").read_text()
    assert rederive(out).agrees
