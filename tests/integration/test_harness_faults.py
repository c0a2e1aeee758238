"""golive itself under stress: a hung target cannot stretch a phase past its caps; SIGINT or
SIGTERM stops the load within a second and seals a partial `hold` bundle; SIGKILL leaves
every record written so far readable. The target is the fake, whose load requests (those
with tools) hang until their client lets go."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CAPACITY_WATCHDOG
from golive.bundle.store import read_lines, record_streams, verify
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.results import CheckResult
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import NO_FLOOR

# Short load windows on a target that never answers a load request.
PHASE_S = 2.0
DRAIN_S = 0.5
GRACE_S = 1.0 + 0.5  # the watchdog's abort grace, plus scheduling slack
CAPACITY = {
    **NO_FLOOR,
    "capacity.concurrency": 3,
    "capacity.step_duration_s": PHASE_S,
    "capacity.calibration_s": PHASE_S,
    "capacity.duration_s": PHASE_S,
    "capacity.drain_s": DRAIN_S,
    "capacity.max_context": 256,
    "target.read_timeout_s": 120,  # only the watchdog can end the hung requests
    "capacity.probe_deadline_s": 1.0,  # the idle tool-call probe hangs too, then is given up
    # every load request carries tools, so every one hangs: a structured request (no tools) is
    # answered at once, and a window whose run seed drew three of them first reached its
    # request cap before its first hung request (seen once in CI)
    "capacity.structured_share": 0.0,
    "capacity.step_max_requests": 1000,
}


def _records(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in record_streams(root) for line in read_lines(path)]


async def test_a_hung_target_cannot_stretch_a_phase(tmp_path: Path) -> None:
    """Each load window of N s ends by N + drain + grace; the hung requests are ended by
    the watchdog and recorded; concurrency never passed its cap."""
    state = FakeState(fault="hang_tools")
    out = tmp_path / "b"
    async with fake_vllm(state) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        config = load_config(None, {"target.url": url, **CAPACITY})
        verdict = await judge(config, out, "capacity", programme, ("capacity",))
    windows = [json.loads(line) for line in (out / CAPACITY_WATCHDOG).read_text().splitlines()]
    # the calibration window, then the ramp stops at its first failing step; no sustained
    # load follows a ramp with no stable step
    assert [(w["phase"], w["concurrency_cap"]) for w in windows] == [
        ("concurrency", 1),
        ("concurrency", 1),
    ]
    for window in windows:
        assert window["stopped_by"] == "watchdog"
        assert window["wall_s"] <= PHASE_S + DRAIN_S + GRACE_S, window
        assert window["peak_in_flight"] == window["concurrency_cap"]
        assert window["cancelled_without_record"] == 0
    assert state.peak_hanging <= 1
    load = [
        r
        for r in _records(out)
        if r["request"] and r["request"].get("tools") and not r["label"].startswith("probe-")
    ]
    assert len(load) == 1 + 1  # one hung request per window
    assert all(r["failure"]["kind"] == "cancelled" for r in load)
    assert all("watchdog" in r["failure"]["message"] for r in load)
    checks = {c["id"]: c for c in verdict.data["checks"]}
    assert checks["capacity.concurrency"]["status"] != "pass"
    assert checks["golive.ledger"]["status"] == "pass"
    assert checks["golive.ledger"]["measurements"]["sent"] == state.chats
    assert verify(out).ok


async def _start_capacity(url: str, out: Path, workers: int = 1) -> asyncio.subprocess.Process:
    """`golive capacity` in a child process (its own process group, as a terminal starts it),
    with load windows far longer than the test (the idle tool-call probe, which hangs too, is
    given up after half a second)."""
    config = out.parent / "probes.yaml"
    config.write_text("capacity:\n  probe_deadline_s: 0.5\n")
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "golive",
        "capacity",
        "--target",
        url,
        "--config",
        str(config),
        "--out",
        str(out),
        "--concurrency",
        "4",
        "--step-duration",
        "120",
        "--duration",
        "120",
        "--max-context",
        "256",
        "--workers",
        str(workers),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


def _loading(out: Path) -> bool:
    """The first load window (calibration) has begun."""
    return (out / "metrics/capacity-calibrate-before.prom").exists()


async def _wait_for(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("sig", "workers"), [(signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGINT, 2)]
)
async def test_signal_stops_the_load_within_a_second_and_seals_a_hold(
    tmp_path: Path, sig: signal.Signals, workers: int
) -> None:
    """SIGINT or SIGTERM to golive's process group (Ctrl-C in a terminal) during a load stops
    every request within a second and seals a partial bundle that holds, with every sent
    request recorded; with --workers the workers' requests too, recorded by the workers.
    golive exits as an interrupted command does (128 + the signal), the outcome inside."""
    state = FakeState(fault="hang_tools")
    out = tmp_path / "b"
    async with fake_vllm(state) as url:
        proc = await _start_capacity(url, out, workers)
        try:
            await _wait_for(lambda: _loading(out) and state.hanging >= 1, 60)
            os.killpg(proc.pid, sig)
            sent = time.monotonic()
            await _wait_for(lambda: state.hanging == 0, 5)
            stopped_s = time.monotonic() - sent
            _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert stopped_s < 1.0, f"load still open {stopped_s:.2f} s after {sig.name}"
    assert proc.returncode == 128 + sig.value, stderr.decode()  # as shells expect (130, 143)
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["outcome"] == "hold"
    assert verdict["rules_fired"][0]["rule"] == "interrupted"
    assert verdict["interrupted"]["signal"] == sig.name
    assert verdict["exit_code"] == proc.returncode  # verdict.json says what the shell saw
    checks = {c["id"]: c for c in verdict["checks"]}
    if workers == 1:  # with workers, each ends its own in-flight requests (counted by them)
        assert checks["golive.interrupted"]["measurements"]["aborted_in_flight"] >= 1
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    assert checks["golive.ledger"]["measurements"]["sent"] == state.chats
    cancelled = [r for r in _records(out) if (r["failure"] or {}).get("kind") == "cancelled"]
    assert len(cancelled) >= 1
    assert all(sig.name in r["failure"]["message"] for r in cancelled)
    assert verify(out).ok
    assert (out / "report.html").exists()


async def test_sigkill_leaves_every_written_record_readable(tmp_path: Path) -> None:
    """A killed run leaves no manifest, but every record line it wrote is whole JSON and the memory
    curve is there."""
    state = FakeState(fault="hang_tools")
    out = tmp_path / "b"
    async with fake_vllm(state) as url:
        proc = await _start_capacity(url, out)
        try:
            await _wait_for(lambda: _loading(out) and state.hanging >= 1, 60)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), 10)
        await _wait_for(lambda: state.hanging == 0, 5)
    assert not (out / "manifest-sha256.txt").exists()
    records = _records(out)  # every line is whole JSON
    assert len(records) >= 7  # /v1/models, /tokenize, the long-input steps, the c1 window
    assert (out / "memory/capacity.csv").read_text().count("\n") >= 2
    verifier = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "golive",
        "verify",
        str(out),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await verifier.communicate()
    assert verifier.returncode != 0
    assert "never sealed" in stderr.decode()
