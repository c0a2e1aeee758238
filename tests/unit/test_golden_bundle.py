"""golive decide's contract on a bundle recorded from the real target: `golive demo` on the
bundled CPU vLLM (tests/data/golden-demo, sealed as the demo left it). Every family's judge
reads it again from the evidence alone and gives the sealed checks exactly; an edited
evidence file is caught even after the manifest is recomputed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from golive.bundle.store import Bundle
from golive.orchestration.rederive import EVIDENCE_JUDGES, EvidenceJudge, Rederived, rederive
from golive.results import Outcome
from golive.verdict.document import VerdictDocument

GOLDEN = Path(__file__).parents[1] / "data/golden-demo"


@pytest.fixture(scope="module")
def again() -> Rederived:
    return rederive(GOLDEN)


def test_the_recorded_demo_rederives_as_sealed(again: Rederived) -> None:
    """The whole bundle: intact, the same outcome and rules, nothing taken as sealed."""
    assert again.problems == ()
    assert again.sealed is Outcome.OBSERVE_WITH_LIMITS
    assert again.decision.outcome is again.sealed
    assert again.as_sealed == ()


@pytest.mark.parametrize("judge", EVIDENCE_JUDGES, ids=[j.name for j in EVIDENCE_JUDGES])
def test_each_family_is_judged_again_from_its_evidence(
    again: Rederived, judge: EvidenceJudge
) -> None:
    """Each judge read the demo's evidence again and owns at least one of its checks."""
    if not judge.present(GOLDEN) and not judge.always:  # a family the demo never ran (k8s)
        assert not any(judge.owns(c.id) for c in VerdictDocument.read(GOLDEN).checks)
        assert judge.name not in again.rejudged
        return
    assert judge.name in again.rejudged
    owned = [c.id for c in VerdictDocument.read(GOLDEN).checks if judge.owns(c.id)]
    assert owned
    assert set(owned) <= set(again.rejudged_ids)


@pytest.mark.tampers_bundle
def test_an_edited_ramp_step_is_caught_after_the_manifest_is_resealed(tmp_path: Path) -> None:
    """Inflating one ramp step's completed count and resealing: the manifest is intact again,
    but capacity.concurrency judged from the edited steps no longer matches the sealed check."""
    copy = tmp_path / "bundle"
    shutil.copytree(GOLDEN, copy)
    steps = copy / "metrics/capacity-steps.jsonl"
    lines = steps.read_text().splitlines()
    lines[-1] = lines[-1].replace('"completed": ', '"completed": 1', 1)
    steps.write_text("\n".join(lines) + "\n")
    Bundle(copy).seal()
    edited = rederive(copy)
    assert not edited.agrees
    assert any(p.startswith("capacity.concurrency") for p in edited.problems), edited.problems
    assert not any("manifest" in p for p in edited.problems)


@pytest.mark.tampers_bundle
@pytest.mark.parametrize(("key", "value"), [("queue_mean_s", 0.0), ("preemptions", 3.0)])
def test_an_edited_engine_figure_is_caught(tmp_path: Path, key: str, value: float) -> None:
    """A ramp step's queue time or preemptions decide stable, limit or expand-capacity: they
    are read again from the step's two saved scrapes, so an edited figure (zeroed to hide
    saturation, or raised to fake it) leaves the ramp unjudged, however it is resealed."""
    copy = tmp_path / "bundle"
    shutil.copytree(GOLDEN, copy)
    steps = copy / "metrics/capacity-steps.jsonl"
    rows = [json.loads(line) for line in steps.read_text().splitlines()]
    rows[1][key] = value  # concurrency 2
    steps.write_text("".join(json.dumps(r) + "\n" for r in rows))
    Bundle(copy).seal()
    checks = {c.id: c for c in rederive(copy).checks}
    ramp = checks["capacity.concurrency"]
    assert ramp.status.value == "no_data"
    assert f"c2: {key} {value!r}, but its scrapes say" in ramp.summary


BEFORE_RULES = Path(__file__).parents[1] / "data/demo-sealed-2026-12-01"


def test_a_demo_sealed_before_todays_rules_is_judged_by_them() -> None:
    """The demo recorded on 2026-12-01, before the completeness, memory, sustained-floor and
    after-load rules and before windows named their memory-curve rows, sealed
    observe-with-limits: decide judges it by today's rules, not its own config's silence,
    and it re-derives hold, naming each rule's check."""
    again = rederive(BEFORE_RULES)
    assert again.sealed is Outcome.OBSERVE_WITH_LIMITS
    assert again.decision.outcome is Outcome.HOLD
    assert not again.agrees
    problems = "\n".join(again.problems)
    for check in ("agent.coverage", "capacity.memory", "cache.after_load"):
        assert f"{check}: re-derived only" in problems, check
    fired = {r.rule for r in again.decision.rules_fired}
    assert {"programme-incomplete", "missing-evidence"} <= fired


@pytest.mark.tampers_bundle
def test_a_rules_key_removed_from_the_saved_config_takes_todays_default(tmp_path: Path) -> None:
    """A reviewer removes `programme`, the sustained floor and the after-load probe key from
    the demo's saved config, and the coverage checks from verdict.json, then re-seals: the
    keys take today's defaults, the checks are judged again, and decide disagrees."""
    copy = tmp_path / "bundle"
    shutil.copytree(GOLDEN, copy)
    path = copy / "config/effective.yaml"
    saved = yaml.safe_load(path.read_text())
    del saved["programme"]
    for key in ("min_sustained_s", "min_sustained_completions"):
        del saved["capacity"][key]
    del saved["cache"]["after_load_probe"]
    path.write_text(yaml.safe_dump(saved))
    data = json.loads((copy / "verdict.json").read_text())
    data["checks"] = [c for c in data["checks"] if not c["id"].endswith(".coverage")]
    (copy / "verdict.json").write_text(json.dumps(data, indent=2))
    Bundle(copy).seal()
    again = rederive(copy)
    assert not again.agrees
    rederived = {c.id for c in again.checks}
    assert {"agent.coverage", "capacity.coverage", "cache.coverage"} <= rederived
    assert "cache.after_load" in rederived
