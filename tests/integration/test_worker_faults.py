"""`--workers` under faults the real engine will not show on demand: a hung target cannot
stretch a window split over worker processes past its caps, and a worker that dies mid-window
ends the run with an internal error naming it, in a sealed bundle, never a silent short
window."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CAPACITY_CLIENTS, CAPACITY_WATCHDOG, GOLIVE_TRACEBACK
from golive.bundle.store import read_lines, record_streams, verify
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext, body_sample
from golive.cli.console import exit_code
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.pipeline import Verdict, client_settings, judge
from golive.results import EXIT_INTERNAL, CheckResult
from golive.traffic.process_load import ProcessLoad, worker_count
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import NO_FLOOR

PHASE_S, DRAIN_S, GRACE_S = 2.0, 0.5, 1.5
CAPACITY = {
    **NO_FLOOR,
    "capacity.concurrency": 4,
    "capacity.step_duration_s": PHASE_S,
    "capacity.calibration_s": PHASE_S,
    "capacity.duration_s": PHASE_S,
    "capacity.drain_s": DRAIN_S,
    "capacity.max_context": 256,
    "target.read_timeout_s": 120,  # only the watchdog can end the hung requests
    "capacity.probe_deadline_s": 1.0,
    # the subject is the watchdog: a request cap the window reaches before its first hung
    # request would stop it instead (seen in full suite runs); and every load request carries
    # tools, so every one hangs (a structured request, with no tools, is answered at once)
    "capacity.step_max_requests": 1000,
    "capacity.structured_share": 0.0,
}


def _records(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in record_streams(root) for line in read_lines(path)]


async def _capacity_on_two_workers(state: FakeState, out: Path) -> Verdict:
    """`golive capacity` against the fake, its windows split over two worker processes."""
    async with fake_vllm(state) as url:
        config = load_config(None, {"target.url": url, **CAPACITY})
        load = ProcessLoad(client_settings(config), 2, body_sample(config))
        try:

            async def programme(ctx: CheckContext) -> list[CheckResult]:
                return await run_capacity(ctx, CapacityInputs(clients=load))

            return await judge(config, out, "capacity", programme, ("capacity",), remote=(load,))
        finally:
            await asyncio.to_thread(load.close)


async def test_a_hung_target_cannot_stretch_a_window_split_over_workers(tmp_path: Path) -> None:
    """The worker's own watchdog ends its share by N + drain + grace; every hung request
    is recorded (by the worker that sent it), and the ledger balances across the workers.
    The ramp stops at its hung first step, and no sustained load follows a ramp with no
    stable step (the split of a window over workers: test_process_load.py, real engine)."""
    state = FakeState(fault="hang_tools")
    out = tmp_path / "b"
    verdict = await _capacity_on_two_workers(state, out)
    windows = [json.loads(line) for line in (out / CAPACITY_WATCHDOG).read_text().splitlines()]
    assert [w["phase"] for w in windows] == ["concurrency", "concurrency"]
    for window in windows:
        assert window["stopped_by"] == "watchdog"
        assert window["wall_s"] <= PHASE_S + DRAIN_S + GRACE_S + 1.0, window  # + the pipe
        assert window["peak_in_flight"] == window["concurrency_cap"]
    rows = [json.loads(x) for x in (out / CAPACITY_CLIENTS).read_text().splitlines()]
    assert {r["client"] for r in rows if r["requests"]} == {"worker-0"}  # one slot: one worker
    load_records = [
        r
        for r in _records(out)
        if r["request"] and r["request"].get("tools") and not r["label"].startswith("probe-")
    ]
    assert len(load_records) == 1 + 1  # one hung request per window
    assert all(r["failure"]["kind"] == "cancelled" for r in load_records)
    assert all(r["label"].endswith("@worker-0") for r in load_records)
    checks = {c["id"]: c for c in verdict.data["checks"]}
    assert checks["capacity.concurrency"]["status"] == "no_data"
    assert checks["capacity.sustained"]["summary"].startswith("not run: the ramp found no")
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    assert verify(out).ok


async def test_a_worker_that_dies_mid_window_is_an_internal_error(tmp_path: Path) -> None:
    """A killed worker process ends the run: golive.internal names the worker, the verdict
    cannot be go-live, and the bundle is still sealed with what was recorded."""
    state = FakeState(fault="hang_tools")
    out = tmp_path / "b"
    async with fake_vllm(state) as url:
        config = load_config(None, {"target.url": url, **CAPACITY})
        load = ProcessLoad(client_settings(config), 2, body_sample(config))

        async def kill_one() -> None:
            while state.peak_hanging == 0:  # a window is under way
                await asyncio.sleep(0.05)
            pid = load.procs[0].pid  # the worker carrying the concurrency-1 window
            assert pid is not None
            os.kill(pid, signal.SIGKILL)

        try:

            async def programme(ctx: CheckContext) -> list[CheckResult]:
                killer = asyncio.ensure_future(kill_one())
                try:
                    return await run_capacity(ctx, CapacityInputs(clients=load))
                finally:
                    killer.cancel()

            verdict = await judge(config, out, "capacity", programme, ("capacity",), remote=(load,))
        finally:
            await asyncio.to_thread(load.close)
    checks = {c["id"]: c for c in verdict.data["checks"]}
    internal = checks["golive.internal"]
    assert internal["status"] == "error"
    assert "worker-0" in internal["summary"], internal["summary"]
    assert verdict.data["outcome"] == "hold"
    assert verify(out).ok
    # golive's own error (issue 30 §2): the command exits 3, the traceback kept for the report
    assert exit_code(verdict.document) == EXIT_INTERNAL == 3
    assert verdict.data["exit_code"] == 3  # verdict.json says what the shell saw
    kept = (out / GOLIVE_TRACEBACK).read_text()
    assert kept.startswith("--- golive\nTraceback (most recent call last):")
    assert "LoadClientError: worker-0" in kept


async def test_answers_with_odd_types_reach_the_bundle_from_the_workers(tmp_path: Path) -> None:
    """A server whose stream holds values of types no server should send (a tool call's id
    a number, its type an object, its index `true`, a finish reason a number): every answer
    a worker parsed still reaches the main process and the bundle, and the ledger balances,
    where a batch the main process could not read would have been lost."""
    state = FakeState(fault="odd_types")
    out = tmp_path / "b"
    verdict = await _capacity_on_two_workers(state, out)
    checks = {c["id"]: c for c in verdict.data["checks"]}
    assert "golive.internal" not in checks or checks["golive.internal"]["status"] != "error"
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    from_workers = [r for r in _records(out) if "@worker-" in r["label"]]
    assert len(from_workers) > 10
    assert state.successes >= len(from_workers)
    assert verify(out).ok


@pytest.mark.parametrize(
    ("given", "expected"),
    [("1", 1), ("3", 3), ("auto", max(1, len(os.sched_getaffinity(0)) - 1))],
)
def test_workers_counts(given: str, expected: int) -> None:
    """--workers takes a positive number or auto (the cores golive may use, less one)."""
    assert worker_count(given) == expected


@pytest.mark.parametrize("given", ["0", "-2", "two", ""])
def test_a_bad_workers_count_names_the_flag(given: str) -> None:
    """A count that is not positive is refused naming --workers and what it takes."""
    with pytest.raises(ConfigError, match="--workers"):
        worker_count(given)


UNGUARDED = """
from golive.checks.context import body_sample
from golive.config_sources import load_config
from golive.orchestration.pipeline import client_settings
from golive.traffic.process_load import ProcessLoad

config = load_config(None, {"target.url": "http://127.0.0.1:9"})
load = ProcessLoad(client_settings(config), 2, body_sample(config))  # no __main__ guard
print("started")
"""


def test_a_worker_that_cannot_start_is_named_before_any_traffic(tmp_path: Path) -> None:
    """A script that starts golive's workers without an `if __name__ == '__main__':` guard
    (each spawned worker imports it again and cannot start): golive says so at once, naming
    the worker and the fix, instead of a load window that never ends minutes later."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert time.monotonic() - started < 60
    assert done.returncode != 0
    assert "started" not in done.stdout
    assert "LoadClientError: worker-0 exited while starting" in done.stderr, done.stderr[-2000:]
    assert "if __name__ == '__main__':" in done.stderr
