"""The API key never leaves the environment variable it was read from: a full `golive run`
with a canary key, then every file of the bundle, the re-rendered report, the JUnit file
and golive's own output are searched for it, plain and base64-encoded at every alignment."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path

from golive.bundle.store import read_lines, record_streams
from golive.target.server import RunningTarget
from tests.helpers.scenario import SMALL_RUN
from tests.helpers.secret_search import encodings, file_bytes


async def test_canary_key_is_in_no_bundle_file_log_or_report(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """No copy of the key, plain or encoded, in the bundle, the report, the JUnit file or the
    log; the requests carried it and their saved copies say so, redacted."""
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
        if needle in file_bytes(path)
    ]
    assert hits == [], hits
    assert len(searched) > 30
    # the requests carried the key (the server saw it), and the saved copies say so, redacted
    lines = [json.loads(line) for path in record_streams(out) for line in read_lines(path)]
    headers = [line["request_headers"] for line in lines if line.get("request_headers")]
    assert headers
    assert all(h["Authorization"] == "***REDACTED***" for h in headers)
