"""A target that fails badly: golive keeps running inside its caps, records each fault as
evidence (never `pass`), writes a verdict, and every chat request it sent has its record.

Faults the real engine cannot show on demand come from the fake; the engine's own SIGKILL
and SIGSTOP are in test_tight_server.py and test_engine_faults.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import read_lines, record_streams, verify
from golive.checks.smoke.collect import run_smoke
from golive.config_sources import load_config
from golive.orchestration.pipeline import Verdict, judge
from tests.helpers.fakes.vllm import FakeState, fake_vllm

CAPS = {
    "target.read_timeout_s": 1.5,
    "target.request_deadline_s": 3.0,
    "target.max_response_mb": 1.0,
    "smoke.classes": False,
}


async def _smoke(url: str, out: Path) -> Verdict:
    return await judge(
        load_config(None, {"target.url": url, **CAPS}), out, "smoke", run_smoke, ("smoke",)
    )


def _checks(verdict: Verdict) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in verdict.data["checks"]}


def _lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in record_streams(root) for line in read_lines(path)]


@pytest.mark.parametrize(
    ("fault", "check_id", "phrase"),
    [
        ("metrics_500", "smoke.metrics", "HTTP 500"),
        ("metrics_hang", "smoke.metrics", "no data for 1.5 s"),
        ("metrics_garbage", "smoke.metrics", "no engine metrics"),
        ("reset_stream", "smoke.text_stream", "connection closed mid-answer"),
        ("malformed_stream", "smoke.text_stream", "not JSON"),
        ("truncated_stream", "smoke.text_stream", "without [DONE]"),
        ("error_event", "smoke.text_stream", "EngineCore encountered an issue"),
        ("drip", "smoke.text_stream", "client deadline of 3 s passed"),
        ("unbounded", "smoke.text_stream", "passed 1,048,576 bytes"),
        ("hang", "smoke.text", "no data for 1.5 s"),
        ("http_500", "smoke.text", "HTTP 500"),
    ],
)
async def test_each_fault_is_recorded_and_never_passes(
    tmp_path: Path, fault: str, check_id: str, phrase: str
) -> None:
    """Each server fault is a named failure, never a pass, inside the run's time caps, with every
    request recorded."""
    state = FakeState(fault=fault)
    started = time.monotonic()
    async with fake_vllm(state) as url:
        verdict = await _smoke(url, tmp_path / "b")
    wall = time.monotonic() - started
    checks = _checks(verdict)
    assert checks[check_id]["status"] in ("fail", "error", "no_data"), checks[check_id]
    assert phrase in checks[check_id]["summary"]
    assert verdict.data["outcome"] != "go-live"
    # inside its caps: at most a few requests, each cut by the read timeout or the deadline
    assert wall < 20, f"{fault}: smoke took {wall:.1f} s"
    ledger = checks["golive.ledger"]
    assert ledger["status"] == "pass", ledger["summary"]
    assert ledger["measurements"]["sent"] == state.chats
    assert verify(tmp_path / "b").ok


async def test_unbounded_answer_is_cut_at_the_cap_and_kept(tmp_path: Path) -> None:
    """The record keeps the first megabyte that arrived; memory stays bounded."""
    async with fake_vllm(FakeState(fault="unbounded")) as url:
        await _smoke(url, tmp_path / "b")
    streamed = [line for line in _lines(tmp_path / "b") if line["stream"]]
    assert streamed[0]["failure"]["kind"] == "transport"
    assert 0 < len(streamed[0]["response_raw"]) <= 1 << 20
