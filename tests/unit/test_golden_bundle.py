"""golive decide's contract on a bundle recorded from the real target: `golive demo` on the
bundled CPU vLLM (tests/data/golden-demo, sealed as the demo left it). Every family's judge
reads it again from the evidence alone and gives the sealed checks exactly; an edited
evidence file is caught even after the manifest is recomputed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from golive.bundle.store import Bundle, BundleReader
from golive.results import Outcome
from golive.verdict.document import VerdictDocument
from golive.verdict.rederive import EVIDENCE_JUDGES, EvidenceJudge, Rederived, rederive

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
    """Each judge read the demo's evidence again and owns at least one of its checks; a rule
    newer than the recording (capacity.memory) does not apply to it, and the bundle
    re-derives without it, as sealed."""
    if judge.applies is not None and not judge.applies(BundleReader(GOLDEN)):
        assert not any(judge.owns(c.id) for c in again.checks)
        return
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
