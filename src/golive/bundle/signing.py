"""Optional Ed25519 signature over a bundle's manifest (tamper evidence beyond sha256).

The manifest names every file's sha256, so a signature over the manifest's bytes covers the
whole bundle: `manifest-signature.json` holds the algorithm, the signing key's fingerprint
and the signature. Keys are PEM files as OpenSSL writes them:

    openssl genpkey -algorithm ed25519 -out golive-signing.pem
    openssl pkey -in golive-signing.pem -pubout -out golive-signing.pub.pem

The private key is read once, used, and never written anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from golive.bundle.layout import MANIFEST
from golive.errors import BundleError, ConfigError

SIGNATURE = "manifest-signature.json"
ALGORITHM = "ed25519"

_GENERATE = "openssl genpkey -algorithm ed25519 -out KEY.pem"


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The signing key in `path` (PEM, unencrypted Ed25519)."""
    data = _read(path, "--sign-key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError as exc:  # encrypted
        raise ConfigError(
            f"--sign-key {path}: the key is encrypted; golive reads unencrypted PEM keys "
            "(keep the file readable only by the signing user)"
        ) from exc
    except ValueError as exc:
        raise ConfigError(
            f"--sign-key {path}: not a PEM private key ({exc}); create one with: {_GENERATE}"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(
            f"--sign-key {path}: a {type(key).__name__.removeprefix('_')} key; golive signs "
            f"with Ed25519 only ({_GENERATE})"
        )
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The verifying key in `path`: a PEM public key, or the private key it belongs to."""
    data = _read(path, "--key")
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        return load_private_key(path).public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"--key {path}: not an Ed25519 public key")
    return key


def fingerprint(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def sign_manifest(root: Path, manifest: bytes, key: Ed25519PrivateKey) -> Path:
    """Write `manifest-signature.json` for the manifest's exact bytes."""
    record = {
        "algorithm": ALGORITHM,
        "key_fingerprint": fingerprint(key.public_key()),
        "signed": MANIFEST,
        "signature": base64.b64encode(key.sign(manifest)).decode("ascii"),
    }
    path = root / SIGNATURE
    try:
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BundleError(f"cannot write {path}: {exc}") from exc
    return path


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    present: bool
    valid: bool
    key_fingerprint: str | None
    problem: str | None


def check_signature(root: Path, manifest: bytes, key: Ed25519PublicKey | None) -> SignatureCheck:
    """Whether the bundle's signature is present and (given a key) made by that key."""
    path = root / SIGNATURE
    if not path.exists():
        return SignatureCheck(False, False, None, f"{SIGNATURE} is missing: not signed")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        signed_by = str(record["key_fingerprint"])
        signature = base64.b64decode(record["signature"], validate=True)
        algorithm = record.get("algorithm")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return SignatureCheck(True, False, None, f"{SIGNATURE} is unreadable: {exc}")
    if algorithm != ALGORITHM:
        return SignatureCheck(True, False, signed_by, f"algorithm {algorithm!r}, not {ALGORITHM}")
    if key is None:
        return SignatureCheck(True, False, signed_by, "not checked: give --key PUBLIC.pem")
    if fingerprint(key) != signed_by:
        return SignatureCheck(
            True, False, signed_by, f"signed by key {signed_by}, not by the key given"
        )
    try:
        key.verify(signature, manifest)
    except InvalidSignature:
        return SignatureCheck(
            True, False, signed_by, "the signature does not match the manifest: altered"
        )
    return SignatureCheck(True, True, signed_by, None)


def _read(path: Path, option: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot be read ({exc.strerror})") from exc
