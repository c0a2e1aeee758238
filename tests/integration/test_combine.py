"""`golive decide --combine`: sealed section bundles of one deployment make one programme
decision; bundles of different deployments, stale or altered bundles are refused by name.

The parts here are sealed bundles with known results (the combination is offline logic over
bundles); the real engine's sections are combined in test_demo.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import verify
from golive.checks.context import CheckContext
from golive.cli.main import main
from golive.config import load_config
from golive.errors import ConfigError
from golive.pipeline import judge
from golive.results import EXIT_USAGE, CheckClass, CheckResult, Outcome, Status
from golive.verdict.combine import combine
from golive.verdict.scope import CAPACITY_PHASES

SECTION_CHECKS = {
    "env": [
        ("environment.vllm_version", CheckClass.ENVIRONMENT),
        ("startup.log", CheckClass.STARTUP),
    ],
    "smoke": [("smoke.health", CheckClass.SMOKE), ("smoke.version", CheckClass.SMOKE)],
    "capacity": [(p, CheckClass.CAPACITY) for p in CAPACITY_PHASES],
    "cache": [("cache.prefix_reuse", CheckClass.CACHE)],
    "agent": [("agent.one_arg.required", CheckClass.AGENT)],
}


async def _section(
    root: Path,
    section: str,
    target: str = "http://127.0.0.1:8000",
    version: str = "0.32.0",
    status: Status = Status.PASS,
) -> Path:
    """A sealed section bundle whose checks are `status`; smoke records the live version."""

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return [
            CheckResult(cid, cls, True, status, f"{cid} {status}", {"vllm_version": version}, ())
            for cid, cls in SECTION_CHECKS[section]
        ]

    config = load_config(None, {"target.url": target})
    # No request is sent: these programmes only return results.
    await judge(config, root / section, section, programme, (section,))
    return root / section


async def _all(root: Path, **changed: Any) -> list[Path]:
    return [await _section(root, s, **changed.get(s, {})) for s in SECTION_CHECKS]


async def test_five_passing_sections_make_a_go_live_programme(tmp_path: Path) -> None:
    """Five passing section bundles combine into one go-live programme bundle that keeps each part
    whole and re-derives."""
    parts = await _all(tmp_path / "parts")
    for part in parts:
        assert json.loads((part / "verdict.json").read_text())["outcome"] == "section-passed"
    verdict = combine(parts, tmp_path / "combined", load_config(None, {}))
    assert verdict.outcome is Outcome.GO_LIVE, verdict.data["rules_fired"]
    assert verdict.data["scope"] == "programme"
    assert [p["scope"] for p in verdict.data["parts"]] == [[s] for s in SECTION_CHECKS]
    for cited, part in zip(verdict.data["parts"], parts, strict=True):
        assert cited["manifest_sha256"].startswith("sha256:")
        assert verify(tmp_path / "combined" / cited["dir"]).ok  # each part is kept whole
        assert cited["bundle"] == str(part.resolve())
    assert verify(tmp_path / "combined").ok
    code = await asyncio.to_thread(main, ["decide", str(tmp_path / "combined")])
    assert code == 0  # the combined verdict re-derives


async def test_a_combined_programme_decides_by_the_same_rules(tmp_path: Path) -> None:
    """A combined bundle is decided by the same rules as golive run: a failed cache part holds, two
    parts are only section-passed."""
    parts = await _all(tmp_path / "parts", cache={"status": Status.FAIL})
    verdict = combine(parts, tmp_path / "combined", load_config(None, {}))
    assert verdict.outcome is Outcome.HOLD
    assert verdict.data["rules_fired"][0]["checks"] == ["cache.prefix_reuse"]
    partial = combine(parts[:2], tmp_path / "partial", load_config(None, {}))
    assert partial.outcome is Outcome.SECTION_PASSED
    assert partial.data["scope"] == ["env", "smoke"]


@pytest.mark.parametrize(
    ("changed", "phrase"),
    [
        ({"agent": {"target": "http://127.0.0.1:9000"}}, "target"),
        ({"smoke": {"version": "0.31.0"}}, "vllm_version"),
    ],
)
async def test_parts_of_different_deployments_are_refused(
    tmp_path: Path, changed: dict[str, Any], phrase: str
) -> None:
    """Parts that describe different deployments are refused, naming what differs, and nothing is
    written."""
    parts = await _all(tmp_path / "parts", **changed)
    with pytest.raises(ConfigError) as info:
        combine(parts, tmp_path / "combined", load_config(None, {}))
    assert f"different deployments: {phrase}" in str(info.value)
    assert not (tmp_path / "combined").exists()


@pytest.mark.tampers_bundle
async def test_stale_duplicated_or_altered_parts_are_refused(tmp_path: Path) -> None:
    """A part older than the allowed age, a section given twice, or an altered part is refused with
    the reason."""
    parts = await _all(tmp_path / "parts")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=8)
    with pytest.raises(ConfigError, match="older than 7 days"):
        combine(parts, tmp_path / "c1", load_config(None, {}), now=later)
    again = await _section(tmp_path / "again", "smoke")
    with pytest.raises(ConfigError, match="section smoke is in both"):
        combine([*parts, again], tmp_path / "c2", load_config(None, {}))
    checks = parts[1] / "verdict.json"
    checks.write_text(checks.read_text().replace('"fail"', '"pass"') + " ")
    with pytest.raises(ConfigError, match="does not match its manifest"):
        combine(parts, tmp_path / "c3", load_config(None, {}))


async def test_cli_combine_and_its_usage_errors(tmp_path: Path, capsys: Any) -> None:
    """golive decide --combine prints the combined outcome; a missing --out or a programme bundle as
    a part is a usage error."""
    parts = [str(p) for p in await _all(tmp_path / "parts")]
    out = tmp_path / "combined"
    argv = ["decide", "--combine", *parts, "--out", str(out)]
    assert await asyncio.to_thread(main, argv) == 0
    assert "combined 5 bundles: go-live" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["decide", "--combine", *parts]) == EXIT_USAGE
    assert "--out DIR" in capsys.readouterr().err
    programme = await asyncio.to_thread(
        main, ["decide", "--combine", str(out), "--out", str(tmp_path / "x")]
    )
    assert programme == EXIT_USAGE  # a programme bundle is not a section
