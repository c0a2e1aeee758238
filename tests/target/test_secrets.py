"""The API key never leaves the environment variable it was read from: a full `golive run`
with a canary key (the session's `keyed_run`), then every file of the bundle, the re-rendered report, the JUnit file
and golive's own output are searched for it, plain and base64-encoded at every alignment."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from golive.bundle.store import read_lines, record_streams
from tests.helpers.scenario import KeyedRun
from tests.helpers.secret_search import encodings, file_bytes


async def test_canary_key_is_in_no_bundle_file_log_or_report(
    keyed_run: KeyedRun, tmp_path: Path
) -> None:
    """No copy of the key, plain or encoded, in the bundle, the report, the JUnit file or the
    log; the requests carried it and their saved copies say so, redacted."""
    out, log, junit = keyed_run.out, keyed_run.log, keyed_run.junit
    assert keyed_run.code in (0, 10, 11, 12, 13), log.read_text()[-2000:]
    with log.open("ab") as sink:
        report = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "golive", "report", str(out), "-o", str(tmp_path / "report"),
            env=keyed_run.env, stdout=sink, stderr=sink,
        )  # fmt: skip
        assert await report.wait() == 0
    verdict = json.loads((out / "verdict.json").read_text())
    assert len(verdict["checks"]) > 20, "not a full run"
    searched = [f for d in (out, tmp_path / "report") for f in d.rglob("*") if f.is_file()]
    searched += [log, junit]
    needles = encodings(keyed_run.canary)
    hits = [
        f"{path} ({kind})"
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
