"""Bundle writing, sealing and verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.bundle.layout import MANIFEST
from golive.bundle.store import Bundle, verify
from golive.errors import BundleError

# the bundles here are built and altered by hand: manifests and signatures, not verdicts
pytestmark = pytest.mark.tampers_bundle


def _sealed(tmp_path: Path) -> Path:
    bundle = Bundle.create(tmp_path / "b", secrets=["sk-secret-123"])
    bundle.write_json("verdict.json", {"outcome": "go-live"})
    bundle.append_jsonl("requests/smoke.jsonl", {"n": 1})
    bundle.append_jsonl("requests/smoke.jsonl", {"n": 2})
    bundle.write_text("metrics/a.prom", "vllm:x 1\n")
    bundle.seal()
    return tmp_path / "b"


def test_sealed_bundle_verifies(tmp_path: Path) -> None:
    """A freshly sealed bundle is intact and its manifest lists every file."""
    root = _sealed(tmp_path)
    assert verify(root).ok
    listed = (root / MANIFEST).read_text().splitlines()
    assert sorted(line.split("  ", 1)[1] for line in listed) == [
        "metrics/a.prom",
        "requests/smoke.jsonl",
        "verdict.json",
    ]


@pytest.mark.parametrize("rel", ["verdict.json", "requests/smoke.jsonl", "metrics/a.prom"])
def test_one_changed_byte_names_the_file(tmp_path: Path, rel: str) -> None:
    """Flipping one byte of any file makes verify fail and name exactly that file."""
    root = _sealed(tmp_path)
    data = bytearray((root / rel).read_bytes())
    data[0] ^= 0x01
    (root / rel).write_bytes(bytes(data))
    report = verify(root)
    assert report.altered == (rel,)
    assert not report.ok


def test_missing_and_extra_files_are_named(tmp_path: Path) -> None:
    """A deleted file is `missing`, a planted one is `extra`."""
    root = _sealed(tmp_path)
    (root / "metrics/a.prom").unlink()
    (root / "requests/planted.jsonl").write_text("{}\n")
    report = verify(root)
    assert report.missing == ("metrics/a.prom",)
    assert report.extra == ("requests/planted.jsonl",)


def test_jsonl_lines_are_on_disk_before_sealing(tmp_path: Path) -> None:
    """Records are flushed as written: a killed run leaves readable JSON lines."""
    bundle = Bundle.create(tmp_path / "b")
    bundle.append_jsonl("requests/x.jsonl", {"a": 1})
    lines = (tmp_path / "b/requests/x.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1}]
    bundle.close()


def test_secrets_never_reach_the_bundle(tmp_path: Path) -> None:
    """A known secret value is replaced in every file written through the bundle."""
    bundle = Bundle.create(tmp_path / "b", secrets=["sk-secret-123"])
    bundle.append_jsonl("requests/x.jsonl", {"auth": "Bearer sk-secret-123"})
    bundle.write_text("report.md", "key sk-secret-123")
    bundle.seal()
    for path in (tmp_path / "b").rglob("*"):
        if path.is_file():
            assert "sk-secret-123" not in path.read_text()


def test_refuses_to_overwrite_a_used_directory(tmp_path: Path) -> None:
    """An --out directory holding files is refused so no evidence is overwritten."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "verdict.json").write_text("{}")
    with pytest.raises(BundleError, match="not empty"):
        Bundle.create(tmp_path / "b")


def test_unsealed_bundle_cannot_verify(tmp_path: Path) -> None:
    """Without a manifest, verify explains the bundle was never sealed."""
    Bundle.create(tmp_path / "b")
    with pytest.raises(BundleError, match="never sealed"):
        verify(tmp_path / "b")
