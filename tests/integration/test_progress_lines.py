"""A run that waits is seen waiting: a server that takes requests and never answers is given
up after the first-byte limit (not the 300 s read timeout), and outside a terminal a plain
line every 10 s says which phase runs, how many requests went out and failed, and for how
long — what a CI log needs to show where a run is."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from golive.cli import progress as progress_module
from golive.cli.main import main
from golive.cli.progress import RichProgress
from tests.helpers.fakes.vllm import FakeState, fake_vllm


async def test_a_mute_server_fails_at_the_first_byte_limit_with_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Chat requests held open without a byte: smoke's text request fails after
    client.first_byte_timeout_s (2 s, the read timeout left at 300 s), the verdict is not
    go-live, and while it waited plain progress lines named the smoke phase."""
    monkeypatch.setattr(progress_module, "PLAIN_EVERY_S", 0.5)
    state = FakeState(fault="hang")
    async with fake_vllm(state) as url:
        started = time.monotonic()
        argv = [
            "smoke",
            "--target",
            url,
            "--out",
            str(tmp_path / "b"),
        ]
        monkeypatch.setenv("GOLIVE_CLIENT_FIRST_BYTE_TIMEOUT_S", "2")
        monkeypatch.setenv("GOLIVE_SMOKE_CLASSES", "false")
        monkeypatch.setenv("GOLIVE_SMOKE_MAX_TOKENS", "2")  # plain answer: 2 s + 0.5 s a token
        code = await asyncio.to_thread(main, argv)
        wall = time.monotonic() - started
        state.release.set()
    shown = capsys.readouterr().err
    assert code == 11  # hold: the server does not answer
    assert wall < 60, f"smoke waited {wall:.0f} s"
    lines = [line for line in shown.splitlines() if line.startswith("golive: smoke — ")]
    assert len(lines) >= 2, shown
    assert "requests" in lines[-1]
    assert "errors" in lines[-1]
    checks = {
        c["id"]: c for c in json.loads((tmp_path / "b" / "verdict.json").read_text())["checks"]
    }
    assert checks["smoke.text"]["status"] != "pass"
    assert "deadline of 3 s" in checks["smoke.text"]["summary"]
    assert checks["smoke.text_stream"]["status"] != "pass"
    assert "did not begin answering" in checks["smoke.text_stream"]["summary"]


def test_plain_lines_carry_phase_requests_errors_elapsed_and_expected() -> None:
    """The line states the phase, requests sent (of the total where known), errors, seconds
    elapsed and the expected length; a new phase starts its own count."""
    console = Console(record=True, width=200, force_terminal=False)
    with RichProgress(console, plain=True) as shown:
        shown.phase("sustained", total_s=600)
        for ok in (True, True, False):
            shown.record(ok)
        shown._print_line()
        shown.phase("agent: 3 cases", requests=80)
        shown.record(True)
        shown._print_line()
    text = console.export_text()
    assert "golive: sustained — 0 requests, 0 errors, 0 s of ~600 s" in text
    assert "golive: sustained — 3 requests, 1 errors, 0 s of ~600 s" in text
    assert "golive: agent: 3 cases — 1/80 requests, 0 errors" in text
