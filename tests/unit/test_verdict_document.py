"""verdict.json is one typed model: what the run writes reads back unchanged, an older
bundle still reads, and an edited or foreign file is refused naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.errors import ConfigError
from golive.results import Outcome, Status
from golive.verdict.document import VerdictDocument

DATA = Path(__file__).parents[1] / "data"
CURRENT = [
    DATA / "vllm-gpu-0.24-h200x1-tier/verdict.json",
    DATA / "vllm-gpu-0.24-kimi-linear-mini-h200x1-tier/verdict.json",
]


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: p.parent.name)
def test_a_real_verdict_reads_back_to_the_same_json(path: Path) -> None:
    """Every key and value a user's script reads survives the typed model unchanged."""
    written = json.loads(path.read_text())
    document = VerdictDocument.from_json(written, str(path))
    assert document.to_json() == written
    assert document.outcome in Outcome
    assert all(c.status in Status for c in document.checks)


def test_an_older_bundle_still_reads() -> None:
    """The demo bundle kept from before `sections_missing`, `waivers` and
    `judged_from_evidence` existed: read, with those empty."""
    document = VerdictDocument.read(DATA / "accepted")
    assert document.scope == "programme"
    assert document.waivers == ()
    assert document.sections_missing == document.judged_from_evidence == ()
    assert document.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert document.limits.disable_features


def test_an_edited_status_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    """A status no golive writes ("passed") is not read as anything: the error says where."""
    data = json.loads(CURRENT[0].read_text())
    data["checks"][3]["status"] = "passed"
    (tmp_path / "verdict.json").write_text(json.dumps(data))
    with pytest.raises(
        ConfigError, match=r"verdict\.json: not a golive verdict: field checks\.3\.status"
    ):
        VerdictDocument.read(tmp_path)


def test_an_unknown_field_and_a_missing_file_are_named(tmp_path: Path) -> None:
    """A field golive never writes, and a missing verdict.json, are refused by name."""
    data = json.loads(CURRENT[0].read_text())
    data["approved_by"] = "someone"
    (tmp_path / "verdict.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="field approved_by: Extra inputs are not permitted"):
        VerdictDocument.read(tmp_path)
    with pytest.raises(ConfigError, match=r"empty/verdict\.json: cannot be read"):
        VerdictDocument.read(tmp_path / "empty")
