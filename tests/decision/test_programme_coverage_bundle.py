"""Issue 29 §2 on real evidence: the CPU demo's recorded programme (every Agent case three
times a mode, the classes, three warm requests, a 600 s sustained window) judged as a new run
is judged: complete. The count comes from the records, so answers cut to one run a mode (the
ledger corrected), a mode's answers deleted, or a case dropped from the plan with its answers
is a programme with a gap — hold, named, and re-derived by `golive decide` — whatever the
plan's `repeat` says."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import AGENT_PLAN, LEDGER_SENT, VERDICT
from golive.bundle.store import Bundle
from golive.orchestration.rederive import rederive
from golive.results import Outcome
from tests.helpers.sections import pinned_image, programme_bundle, section_bundle

pytestmark = pytest.mark.tampers_bundle

JUDGED: dict[str, Any] = {"programme.not_used": []}  # a new run's config: judged on completeness


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("coverage") / "b"
    asyncio.run(programme_bundle(root, pinned_image, JUDGED))
    return root


def _checks(root: Path) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in json.loads((root / VERDICT).read_text())["checks"]}


def _rules(root: Path) -> dict[str, list[str]]:
    verdict = json.loads((root / VERDICT).read_text())
    return {r["rule"]: r["checks"] for r in verdict["rules_fired"]}


def test_the_recorded_programme_is_complete(judged: Path) -> None:
    """Every part ran as a decision needs: each Agent case 3 times a mode, the 600 s sustained
    window with 1,421 answers, the classes and three warm requests; no programme-incomplete
    rule, and golive decide agrees."""
    verdict = json.loads((judged / VERDICT).read_text())
    assert verdict["outcome"] == Outcome.OBSERVE_WITH_LIMITS.value
    assert "programme-incomplete" not in _rules(judged)
    checks = _checks(judged)
    assert checks["agent.coverage"]["status"] == "pass"
    assert "each at least 3 time(s) per mode" in checks["agent.coverage"]["summary"]
    sustained = checks["capacity.coverage"]
    assert sustained["status"] == "pass"
    assert "held 600 s and answered 1421" in sustained["summary"]
    assert checks["smoke.coverage"]["status"] == "pass"
    assert checks["cache.coverage"]["status"] == "pass"
    assert rederive(judged).agrees, rederive(judged).problems


def _edit_plan(root: Path, change: Any) -> None:
    plan = json.loads((root / AGENT_PLAN).read_text())
    change(plan)
    (root / AGENT_PLAN).write_text(json.dumps(plan))
    Bundle(root).seal()


def test_answers_cut_to_one_run_a_mode_are_counted_as_such(judged: Path, tmp_path: Path) -> None:
    """One case's answers cut to its first run a mode, the ledger's count corrected and the
    plan still saying `repeat: 3`, re-sealed: the answers hold one run a mode, so decide
    finds the gap and holds."""
    root = tmp_path / "b"
    shutil.copytree(judged, root)
    stream = root / "requests/agent.one_arg.required.jsonl"
    lines = stream.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["label"].endswith("-0")]
    assert 0 < len(kept) < len(lines)
    stream.write_text("\n".join(kept) + "\n")
    ledger = root / LEDGER_SENT
    sent = json.loads(ledger.read_text())
    ledger.write_text(json.dumps({**sent, "sent": sent["sent"] - (len(lines) - len(kept))}))
    _edit_plan(root, lambda plan: plan.update(repeat=3))
    again = rederive(root)
    assert again.decision.outcome is Outcome.HOLD
    fired = {r.rule: r for r in again.decision.rules_fired}
    assert "agent.coverage" in fired["programme-incomplete"].check_ids
    coverage = next(c for c in again.checks if c.id == "agent.coverage")
    assert "one_arg.required 1" in coverage.summary
    assert {c.id: c.status for c in again.checks}["golive.ledger"].value == "pass"


def test_dropping_the_failing_case_leaves_it_out(judged: Path, tmp_path: Path) -> None:
    """The demo's failing case (tool_choice=auto) removed from the plan with its answers, as
    if never run: it is a case left out, never a cleaner Agent section."""
    root = tmp_path / "b"
    shutil.copytree(judged, root)
    (root / "requests/agent.one_arg.auto.jsonl").unlink()
    _edit_plan(
        root,
        lambda plan: plan.update(cases=[c for c in plan["cases"] if c["name"] != "one_arg.auto"]),
    )
    again = rederive(root)
    assert again.decision.outcome is Outcome.HOLD
    coverage = next(c for c in again.checks if c.id == "agent.coverage")
    assert "left out (agent.cases): one_arg.auto" in coverage.summary


async def test_a_cache_section_with_three_warm_requests_is_covered(tmp_path: Path) -> None:
    """The cache section alone (three warm requests): covered, section-passed, re-derived."""
    root = await section_bundle(tmp_path / "cache", "cache", None, JUDGED)
    checks = _checks(root)
    assert checks["cache.coverage"]["status"] == "pass", checks["cache.coverage"]
    assert "3 warm requests" in checks["cache.coverage"]["summary"]
    assert "programme-incomplete" not in _rules(root)
    assert rederive(root).agrees


def test_a_mode_whose_answers_are_gone_is_counted(judged: Path, tmp_path: Path) -> None:
    """Every non-streamed answer of one case deleted (where only that mode's parser failed):
    the case ran in one mode only, named as fewer than three a mode, never a cleaner case."""
    root = tmp_path / "b"
    shutil.copytree(judged, root)
    stream = root / "requests/agent.structured.jsonl"
    kept = [line for line in stream.read_text().splitlines() if "-plain-" not in line]
    stream.write_text("\n".join(kept) + "\n")
    Bundle(root).seal()
    again = rederive(root)
    assert again.decision.outcome is Outcome.HOLD
    coverage = next(c for c in again.checks if c.id == "agent.coverage")
    assert "structured 0" in coverage.summary
