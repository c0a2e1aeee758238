"""Tamper evidence: the sha256 manifest catches an edited, missing or added file; an Ed25519
signature over the manifest also catches an editor who re-computed the manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from golive.bundle.layout import MANIFEST
from golive.bundle.signing import SIGNATURE, load_private_key, load_public_key
from golive.bundle.store import Bundle, verify
from golive.cli.main import main
from golive.errors import ConfigError
from tests.helpers.keys import ed25519_keys

# the bundles here are built and altered by hand: manifests and signatures, not verdicts
pytestmark = pytest.mark.tampers_bundle


def _keys(tmp_path: Path, name: str = "k") -> tuple[Path, Path]:
    return ed25519_keys(tmp_path, name)


def _sealed(root: Path, private: Path | None) -> Path:
    bundle = Bundle.create(root)
    bundle.write_json("verdict.json", {"outcome": "go-live"})
    bundle.append_jsonl("requests/smoke.jsonl", {"request_id": "r1"})
    bundle.write_text("report.md", "# report\n")
    bundle.seal(None if private is None else load_private_key(private))
    return root


def test_signed_bundle_verifies_with_its_key(tmp_path: Path) -> None:
    """A signed bundle verifies with its public key, the signature kept outside the hashed manifest."""
    private, public = _keys(tmp_path)
    root = _sealed(tmp_path / "b", private)
    report = verify(root, load_public_key(public))
    assert report.ok
    assert report.signature is not None
    assert report.signature.valid
    assert SIGNATURE not in (root / MANIFEST).read_text()  # the signature is outside the hash


@pytest.mark.parametrize("change", ["altered", "missing", "extra"])
def test_any_file_change_fails_verify(tmp_path: Path, change: str) -> None:
    """An altered, missing or added file fails verify, with or without the key."""
    private, public = _keys(tmp_path)
    root = _sealed(tmp_path / "b", private)
    if change == "altered":
        (root / "verdict.json").write_text('{"outcome": "hold"}\n')
    elif change == "missing":
        (root / "report.md").unlink()
    else:
        (root / "requests/extra.jsonl").write_text("{}\n")
    for key in (None, load_public_key(public)):
        report = verify(root, key)
        assert not report.ok
        assert getattr(report, change) != ()


def test_a_recomputed_manifest_is_caught_only_by_the_signature(tmp_path: Path) -> None:
    """Someone edits the verdict and rewrites the manifest: sha256 alone says intact."""
    private, public = _keys(tmp_path)
    root = _sealed(tmp_path / "b", private)
    (root / "verdict.json").write_text('{"outcome": "go-live", "edited": true}\n')
    lines = (root / MANIFEST).read_text().splitlines()
    digest = hashlib.sha256((root / "verdict.json").read_bytes()).hexdigest()
    (root / MANIFEST).write_text(
        "\n".join(f"{digest}  verdict.json" if line.endswith("  verdict.json") else line for line in lines)
        + "\n"
    )  # fmt: skip
    assert verify(root).ok  # the manifest matches the files again
    report = verify(root, load_public_key(public))
    assert not report.ok
    assert report.signature is not None
    assert report.signature.problem == "the signature does not match the manifest: altered"


def test_wrong_key_and_missing_signature_fail(tmp_path: Path) -> None:
    """Another key, or no signature where a key is given, fails verify saying which."""
    private, _ = _keys(tmp_path)
    _, other_public = _keys(tmp_path, "other")
    signed = _sealed(tmp_path / "signed", private)
    report = verify(signed, load_public_key(other_public))
    assert not report.ok
    assert report.signature is not None
    assert "not by the key given" in (report.signature.problem or "")
    unsigned = _sealed(tmp_path / "unsigned", None)
    report = verify(unsigned, load_public_key(other_public))
    assert not report.ok
    assert report.signature is not None
    assert "missing" in (report.signature.problem or "")


def test_resealing_without_a_key_drops_the_stale_signature(tmp_path: Path) -> None:
    """Re-sealing without a key drops the signature that no longer covers the manifest."""
    private, _ = _keys(tmp_path)
    root = _sealed(tmp_path / "b", private)
    assert (root / SIGNATURE).exists()
    bundle = Bundle(root)
    bundle.write_text("signoff.md", "signed\n")
    bundle.seal()
    assert not (root / SIGNATURE).exists()
    assert verify(root).ok


def test_cli_verify_with_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """golive verify --key says whether the signature is valid; without a key it checks the files
    only."""
    private, public = _keys(tmp_path)
    _, other = _keys(tmp_path, "other")
    root = _sealed(tmp_path / "b", private)
    assert main(["verify", str(root), "--key", str(public)]) == 0
    assert "signature valid" in capsys.readouterr().out
    assert main(["verify", str(root), "--key", str(private)]) == 0  # the private key also works
    assert main(["verify", str(root), "--key", str(other)]) == 1
    assert "not by the key given" in capsys.readouterr().out
    assert main(["verify", str(root)]) == 0  # without --key: the files only
    assert "not checked" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (None, "cannot be read"),
        (b"not a key\n", "not a PEM private key"),
        ("rsa", "Ed25519 only"),
        ("encrypted", "encrypted"),
    ],
)
def test_bad_signing_keys_are_named(
    tmp_path: Path, content: bytes | str | None, phrase: str
) -> None:
    """A key that is not an unencrypted Ed25519 PEM is refused saying what it is."""
    path = tmp_path / "key.pem"
    if content == "rsa":
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        content = rsa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    elif content == "encrypted":
        content = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass"),
        )
    if isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=phrase) as err:
        load_private_key(path)
    assert str(path) in str(err.value)
