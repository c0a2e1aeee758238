"""Searching files for an API key, however it was encoded."""

from __future__ import annotations

import base64
from pathlib import Path

from golive.bundle.store import ZSTD, read_lines


def encodings(secret: str) -> dict[str, bytes]:
    """Byte strings any copy of `secret` would contain, however it was encoded: base64 of
    the secret at each of the three alignments (its stable middle part), urlsafe too, hex."""
    raw = secret.encode()
    found = {"plain": raw, "hex": raw.hex().encode()}
    for offset in range(3):
        for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * offset + raw)
            middle = encoded[4 : len(encoded) - 4]  # drop what the neighbours could change
            found[f"{name}@{offset}"] = middle
    return found


def file_bytes(path: Path) -> bytes:
    """A file's bytes, a compressed record stream's decompressed."""
    return "".join(read_lines(path)).encode() if path.name.endswith(ZSTD) else path.read_bytes()
