"""The real engine frozen mid-phase (SIGSTOP, then SIGCONT): golive keeps to its caps, records
the stall as timeouts, writes a sealed verdict, and the engine serves again afterwards.
(The engine's SIGKILL mid-phase is in test_capacity.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path

from golive.bundle import read_lines, record_streams, verify
from golive.checks.capacity import CapacityInputs
from golive.checks.capacity_load import WATCHDOG
from golive.checks.capacity_phases import run_capacity
from golive.checks.context import CheckContext
from golive.config import load_config
from golive.results import CheckResult
from golive.run import judge
from golive.sampling import process_tree
from golive.target.server import RunningTarget
from golive.traffic.client import ClientSettings, TargetClient
from tests.scenario import SMALL_REQUESTS

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


async def test_frozen_engine_is_recorded_and_the_run_stays_in_its_caps(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    out = tmp_path / "b"
    config = load_config(None, {"target.url": real_target.url, **SETTINGS})

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_capacity(ctx, CapacityInputs(target_pid=real_target.pid))

    run = asyncio.create_task(judge(config, out, "capacity", programme, ("capacity",)))
    marker = out / "metrics/capacity-c1-before.prom"
    for _ in range(900):
        if marker.exists() or run.done():
            break
        await asyncio.sleep(0.2)
    assert marker.exists(), "the concurrency ramp never started"
    await asyncio.sleep(1.0)
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
    for window in (json.loads(w) for w in (out / WATCHDOG).read_text().splitlines()):
        assert window["wall_s"] <= window["duration_s"] + DRAIN_S + 1.5, window
        assert window["peak_in_flight"] <= window["concurrency_cap"]
    assert verify(out).ok

    async with TargetClient(ClientSettings(real_target.url, read_timeout_s=60)) as client:
        body = {"messages": [{"role": "user", "content": "Say ok."}], "max_tokens": 2}
        models = await client.get("/v1/models", "models")
        body["model"] = json.loads(models.raw_text)["data"][0]["id"]
        after = await client.chat(body, "after-sigcont")
    assert after.ok, "the engine did not serve again after SIGCONT"
