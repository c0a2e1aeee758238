"""`golive guardrails` turns into alerts only a bundle `golive watch --accepted` would keep a
deployment inside: intact and re-derived to its sealed verdict. A reviewer's signed digest is
copied onto the alerts only where the manifest's signature proves the sign-off. The bundles
are copies of the recorded demo (tests/data/golden-demo, the real CPU vLLM)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from golive.bundle.layout import MANIFEST
from golive.bundle.signing import load_private_key
from golive.bundle.store import Bundle
from golive.errors import ConfigError
from golive.operate.guardrail_files import write_guardrails
from golive.orchestration.rederive import require_rederived
from tests.helpers.keys import ed25519_keys

GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "accepted"
    shutil.copytree(GOLDEN, root)
    return root


def _raise_the_cap(root: Path) -> None:
    """verdict.json edited by hand: go-live, with a cap of 4,000 the evidence never saw."""
    path = root / "verdict.json"
    verdict = json.loads(path.read_text())
    verdict["outcome"] = "go-live"
    verdict["limits"]["max_concurrency"] = 4000
    path.write_text(json.dumps(verdict, indent=2))


def _annotations(out: Path) -> list[dict[str, str]]:
    rules = yaml.safe_load(out.read_text())["groups"][0]["rules"]
    return [rule["annotations"] for rule in rules]


@pytest.mark.tampers_bundle
def test_a_verdict_edited_and_resealed_is_refused(tmp_path: Path) -> None:
    """Edited to go-live with a cap of 4,000 and sealed again: the manifest matches, but the
    evidence gives observe-with-limits; no rules file is written from it."""
    root = _copy(tmp_path)
    _raise_the_cap(root)
    Bundle(root).seal()
    out = tmp_path / "rules.yml"
    with pytest.raises(ConfigError, match="guardrails refused: golive decide does not re-derive"):
        write_guardrails(root, out, vouch=require_rederived)
    assert not out.exists()


@pytest.mark.tampers_bundle
def test_a_verdict_edited_after_sealing_is_refused(tmp_path: Path) -> None:
    """Edited and not sealed again: the bundle no longer matches its manifest."""
    root = _copy(tmp_path)
    _raise_the_cap(root)
    out = tmp_path / "rules.yml"
    with pytest.raises(ConfigError, match=r"does not match its manifest \(altered: verdict.json"):
        write_guardrails(root, out, vouch=require_rederived)
    assert not out.exists()


def test_the_recorded_demo_gives_rules_naming_its_seal(tmp_path: Path) -> None:
    """An intact bundle that re-derives gives its rules, each naming the manifest's digest;
    an unsigned bundle names no signed digest."""
    root = _copy(tmp_path)
    out = tmp_path / "rules.yml"
    write_guardrails(root, out, 10.0, vouch=require_rederived)
    digest = "sha256:" + hashlib.sha256((root / MANIFEST).read_bytes()).hexdigest()
    notes = _annotations(out)
    assert notes
    assert all(n["bundle_digest"] == digest for n in notes)
    assert all("signed_bundle_digest" not in n for n in notes)
    check = subprocess.run(["promtool", "check", "rules", str(out)], check=False)
    assert check.returncode == 0


def _signed_off(root: Path, key: Path | None) -> str:
    """A reviewer's signature recorded in signoff.json over the bundle as sealed, then the
    bundle sealed again (with `key`, as `golive signoff --sign-key` seals it)."""
    digest = "sha256:" + hashlib.sha256((root / MANIFEST).read_bytes()).hexdigest()
    path = root / "signoff.json"
    record = json.loads(path.read_text())
    record["signature"] = {
        "reviewer": "A. Reviewer",
        "signed_at": "2026-12-06T10:00:00+00:00",
        "outcome": "observe-with-limits",
        "verdict_outcome": "observe-with-limits",
        "bundle_digest": digest,
        "override_reason": None,
        "taken_as_sealed": [],
    }
    path.write_text(json.dumps(record, indent=2))
    Bundle(root).seal(None if key is None else load_private_key(key))
    return digest


def test_a_signed_digest_is_copied_only_under_a_trusted_key(tmp_path: Path) -> None:
    """Sealed by the reviewer's key and given that key: every alert names the signed digest.
    Without the key, or with another one, signoff.json's word proves nothing: the digest is
    left out and the reason is said."""
    private, public = ed25519_keys(tmp_path, "reviewer")
    _, other = ed25519_keys(tmp_path, "other")
    root = _copy(tmp_path)
    signed = _signed_off(root, private)
    out = tmp_path / "rules.yml"
    assert not any(
        "signed_bundle_digest" in x
        for x in write_guardrails(root, out, trusted=[public], vouch=require_rederived)
    )
    assert all(n["signed_bundle_digest"] == signed for n in _annotations(out))
    for trusted, why in (([], "give --trust-key"), ([other], "not sealed by a trusted key")):
        left_out = write_guardrails(root, out, trusted=trusted, vouch=require_rederived)
        assert all("signed_bundle_digest" not in n for n in _annotations(out))
        assert any(x.startswith("signed_bundle_digest") and why in x for x in left_out)
        assert why in out.read_text()


def test_a_signature_written_in_without_the_key_is_not_copied(tmp_path: Path) -> None:
    """A signature added to signoff.json and the bundle sealed again without the reviewer's
    key: the manifest matches, the evidence re-derives, but nothing proves the sign-off."""
    _, public = ed25519_keys(tmp_path, "reviewer")
    root = _copy(tmp_path)
    _signed_off(root, None)
    out = tmp_path / "rules.yml"
    left_out = write_guardrails(root, out, trusted=[public], vouch=require_rederived)
    assert all("signed_bundle_digest" not in n for n in _annotations(out))
    assert any("manifest-signature.json is missing" in x for x in left_out)
