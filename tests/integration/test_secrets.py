"""The API key never leaves the environment variable it was read from: a full `golive run`
with a canary key, then every file of the bundle, the re-rendered report, the JUnit file
and golive's own output are searched for it, plain and base64-encoded at every alignment."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import sys
from pathlib import Path

from golive.bundle.store import ZSTD, read_lines, record_streams
from golive.target.server import RunningTarget
from tests.scenario import SMALL_RUN


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


def test_encodings_find_a_key_inside_encoded_headers() -> None:
    """The search itself can fail: it finds the key in a base64 Basic-auth header."""
    key = "sk-canary-" + "ab12" * 8
    header = base64.b64encode(f"user:{key}".encode())
    assert any(needle in header for needle in encodings(key).values())
    assert not any(needle in header for needle in encodings("sk-other-" + "cd34" * 8).values())


async def test_canary_key_is_in_no_bundle_file_log_or_report(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    canary = f"sk-golive-canary-{secrets.token_hex(16)}"
    env = {**os.environ, "GOLIVE_CANARY_KEY": canary}
    config = tmp_path / "run.yaml"
    config.write_text(SMALL_RUN)
    out, log, junit = tmp_path / "bundle", tmp_path / "golive.log", tmp_path / "junit.xml"
    golive = [sys.executable, "-m", "golive"]
    with log.open("wb") as sink:
        run = await asyncio.create_subprocess_exec(
            *golive, "run", "--target", real_target.url, "--api-key-env", "GOLIVE_CANARY_KEY",
            "--log", str(real_target.log_path), "--config", str(config), "--out", str(out),
            "--prefix-tokens", "320", "--warm-repeats", "2", "--cold-samples", "1",
            "--junit", str(junit), "--json",
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
        assert await asyncio.wait_for(run.wait(), 900) in (0, 10, 11, 12, 13)
        report = await asyncio.create_subprocess_exec(
            *golive, "report", str(out), "-o", str(tmp_path / "report"),
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
        assert await report.wait() == 0
    verdict = json.loads((out / "verdict.json").read_text())
    assert len(verdict["checks"]) > 20, "not a full run"
    searched = [f for d in (out, tmp_path / "report") for f in d.rglob("*") if f.is_file()]
    searched += [log, junit]
    needles = encodings(canary)
    hits = [
        f"{path.relative_to(tmp_path)} ({kind})"
        for path in searched
        for kind, needle in needles.items()
        if needle in _content(path)
    ]
    assert hits == [], hits
    assert len(searched) > 30
    # the requests carried the key (the server saw it), and the saved copies say so, redacted
    lines = [json.loads(line) for path in record_streams(out) for line in read_lines(path)]
    headers = [line["request_headers"] for line in lines if line.get("request_headers")]
    assert headers
    assert all(h["Authorization"] == "***REDACTED***" for h in headers)


def _content(path: Path) -> bytes:
    """A file's bytes, a compressed record stream's decompressed."""
    return "".join(read_lines(path)).encode() if path.name.endswith(ZSTD) else path.read_bytes()
