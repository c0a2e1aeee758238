"""The real engine frozen mid-phase (SIGSTOP, then SIGCONT): golive keeps to its caps, records
the stall as timeouts, writes a sealed verdict, and the engine serves again afterwards.
(The engine's SIGKILL mid-phase is in test_tight_server.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from golive.bundle.layout import CAPACITY_WATCHDOG
from golive.bundle.store import read_lines, record_streams, verify
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.evidence.sampling import process_tree
from golive.orchestration.pipeline import Verdict, judge
from golive.results import CheckResult
from golive.target.server import RunningTarget
from golive.traffic.client import ClientSettings, TargetClient
from tests.helpers.scenario import SMALL_REQUESTS

STEP_S, DRAIN_S, FROZEN_S = 8.0, 2.0, 7.0
SETTINGS = {
    "capacity.concurrency": 2,
    **SMALL_REQUESTS,
    "capacity.max_context": 128,
    "capacity.step_duration_s": STEP_S,
    "capacity.duration_s": STEP_S,
    "capacity.drain_s": DRAIN_S,
    "target.read_timeout_s": 3.0,
}


def _signal_tree(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


async def _ramp_started(
    target: RunningTarget, out: Path, settings: dict[str, Any]
) -> asyncio.Task[Verdict]:
    """`golive capacity` running in the background, one second into its concurrency ramp."""
    config = load_config(None, {"target.url": target.url, **settings})

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_capacity(ctx, CapacityInputs(target_pid=target.pid))

    run = asyncio.create_task(judge(config, out, "capacity", programme, ("capacity",)))
    marker = out / "metrics/capacity-c1-before.prom"
    for _ in range(900):
        if marker.exists() or run.done():
            break
        await asyncio.sleep(0.2)
    assert marker.exists(), "the concurrency ramp never started"
    await asyncio.sleep(1.0)
    return run


async def test_frozen_engine_is_recorded_and_the_run_stays_in_its_caps(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """An engine frozen mid-ramp: its requests time out and are recorded, the ramp is not a
    pass, every window stays inside its caps, and the engine serves again after SIGCONT."""
    out = tmp_path / "b"
    run = await _ramp_started(real_target, out, SETTINGS)
    tree = process_tree(real_target.pid)
    _signal_tree(tree, signal.SIGSTOP)
    try:
        await asyncio.sleep(FROZEN_S)
    finally:
        _signal_tree(tree, signal.SIGCONT)
    verdict = await asyncio.wait_for(run, 300)

    checks = {c["id"]: c for c in verdict.data["checks"]}
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    assert checks["capacity.concurrency"]["status"] != "pass"
    records = [
        json.loads(line) for path in record_streams(out, "capacity-*") for line in read_lines(path)
    ]
    kinds = {(r["failure"] or {}).get("kind") for r in records}
    assert "timeout" in kinds, kinds
    for window in (json.loads(w) for w in (out / CAPACITY_WATCHDOG).read_text().splitlines()):
        assert window["wall_s"] <= window["duration_s"] + DRAIN_S + 1.5, window
        assert window["peak_in_flight"] <= window["concurrency_cap"]
    assert verify(out).ok

    async with TargetClient(ClientSettings(real_target.url, read_timeout_s=60)) as client:
        body = {"messages": [{"role": "user", "content": "Say ok."}], "max_tokens": 2}
        models = await client.get("/v1/models", "models")
        body["model"] = json.loads(models.raw_text)["data"][0]["id"]
        after = await client.chat(body, "after-sigcont")
    assert after.ok, "the engine did not serve again after SIGCONT"


STALL = {
    **SETTINGS,
    "capacity.concurrency": 1,
    "capacity.step_duration_s": 12.0,
    "capacity.duration_s": 6.0,
    "capacity.stall_s": 6.0,
}


async def test_a_hung_engine_with_health_200_is_a_stall_not_capacity(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """Only the engine's processes frozen, the API server left running (what vLLM #51663
    reports): /health keeps answering 200 while no token comes. golive names the stall, holds,
    and sets no capacity limit."""
    out = tmp_path / "b"
    run = await _ramp_started(real_target, out, STALL)
    engine = [pid for pid in process_tree(real_target.pid) if pid != real_target.pid]
    assert engine, "the API server has no engine process to freeze"
    _signal_tree(engine, signal.SIGSTOP)
    try:
        async with TargetClient(ClientSettings(real_target.url, read_timeout_s=5)) as client:
            health = await client.get("/health", "health-while-frozen")
        await asyncio.sleep(13.0)
    finally:
        _signal_tree(engine, signal.SIGCONT)
    verdict = await asyncio.wait_for(run, 300)
    assert health.status == 200, "the API server's /health did not answer while the engine hung"

    checks = {c["id"]: c for c in verdict.data["checks"]}
    ramp = checks["capacity.concurrency"]
    assert ramp["status"] == "fail", ramp["summary"]
    assert ramp["measurements"]["classification"] == "engine-stalled"
    assert "engine stalled: no byte of any answer" in ramp["summary"]
    assert "while /health answered 200" in ramp["summary"]
    assert verdict.data["outcome"] == "hold"
    assert "engine-stalled" in {r["rule"] for r in verdict.data["rules_fired"]}
    assert "max_concurrency" not in verdict.data["limits"]
