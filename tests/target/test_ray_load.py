"""`capacity --ray` and `agent --ray` on the real local vLLM: the load leaves from one client
actor per node of a loopback Ray cluster and comes back as one bundle."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CAPACITY_CLIENTS, CAPACITY_WATCHDOG
from golive.bundle.store import read_lines, record_streams
from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.select import cases_for
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import client_settings, judge
from golive.profiles import load_profile
from golive.results import CheckResult
from golive.target.server import RunningTarget
from tests.helpers.ray_cluster import LoopbackCluster, RayLoad, split, three_node_cluster
from tests.helpers.scenario import SMALL_REQUESTS
from tests.helpers.sustained import assert_sustained_read_the_clients


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    yield from three_node_cluster()


async def test_capacity_from_three_ray_clients_is_one_bundle(
    cluster: LoopbackCluster, real_target: RunningTarget, tmp_path: Path
) -> None:
    """The load windows split over one actor per node; every record streams back into one
    bundle, and what the bundle holds equals what the actors' clients sent."""
    out = tmp_path / "b"
    settings = {
        **SMALL_REQUESTS,
        "target.url": real_target.url,
        "capacity.concurrency": 3,
        "capacity.max_context": 128,
        "capacity.step_duration_s": 6,
        "capacity.duration_s": 20,  # >= 30 completions: the fewest a drift is judged on
        # three actors, their raylet and the CPU vLLM share 2 cores: CI measured one actor's
        # mean send lag at 98.7 ms beside 1-2 s answers (the 5 ms default judged that window
        # golive's own). This test is about the split; the niceness is asserted directly.
        "capacity.client_max_lag_ms": 250.0,
    }
    config = load_config(None, settings)
    load = await asyncio.to_thread(RayLoad, cluster.cluster.address, client_settings(config))
    try:
        inputs = CapacityInputs(target_pid=real_target.pid, clients=load)

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, inputs)

        verdict = await judge(config, out, "capacity", programme, ("capacity",), remote=(load,))
    finally:
        load.close()
    assert len(load.actors) == 3
    rows = [json.loads(line) for line in (out / CAPACITY_CLIENTS).read_text().splitlines()]
    windows = [r for r in rows if r["client"] != "main"]
    mains = [r for r in rows if r["client"] == "main"]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for w in windows:
        groups.setdefault((w["phase"], w["window_concurrency"]), []).append(w)
    checks = {c["id"]: c for c in verdict.data["checks"]}
    ramp = checks["capacity.concurrency"]
    # the ramp's top step: one request each on 3 clients
    assert ("concurrency", 3) in groups, (ramp["summary"], checks["golive.client_headroom"])
    for (_, level), shares in groups.items():
        # a window appears once per client; the ramp and sustained may both run a level
        per_window = split(level, 3)
        assert len(shares) % len(per_window) == 0
        assert len({w["client"] for w in shares}) == len(per_window)
    assert all(w["requests"] == w["sent"] > 0 for w in windows)
    assert all(w["lag_p99_ms"] is not None for w in windows)
    # each client machine measured its own headroom (event loop, CPU) for golive.client_headroom
    assert all(w["loop_lag_p99_ms"] is not None and w["cpu_share"] is not None for w in rows)
    # golive's own process, which receives every record, has its row in each window too
    watchdog = [json.loads(line) for line in (out / CAPACITY_WATCHDOG).read_text().splitlines()]
    assert len(mains) == sum(w["phase"] in ("concurrency", "sustained") for w in watchdog) > 0
    assert all(m["requests"] == 0 for m in mains)  # no answer probes here: no lane of its own
    records = [
        json.loads(line)
        for phase in ("concurrency", "sustained")
        for path in record_streams(out, f"capacity-{phase}")
        for line in read_lines(path)
    ]
    assert len(records) == sum(w["sent"] for w in windows)
    assert {r["label"].split("@")[1] for r in records} == set(load.names)
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    # the actors left Ray's niceness 15 (as root; CI runs as root): on this 2-core box beside
    # the CPU vLLM, at 15 they were starved and golive rightly judged a window its own
    assert all(w["niceness"] == 0 for w in windows) or os.geteuid() != 0, windows
    headroom = checks["golive.client_headroom"]
    assert headroom["status"] == "pass", (headroom["summary"], headroom["measurements"])
    assert_sustained_read_the_clients(out, checks["capacity.sustained"])


async def test_agent_requests_leave_from_the_three_clients(
    cluster: LoopbackCluster, real_target: RunningTarget, tmp_path: Path
) -> None:
    """`agent --ray`: each chat request goes out from the actors in turn and comes back
    for the contract checks; the ledger counts what the actors' clients sent."""
    out = tmp_path / "b"
    config = load_config(
        None,
        {
            "target.url": real_target.url,
            "agent.repeat": 2,
            "agent.temperature": 0.0,
            "agent.concurrency": 3,
            "agent.cases": ["one_arg.required"],
        },
    )
    settings = AgentSettings.from_config(
        config, cases_for(config.agent, load_profile(config.profile))
    )
    load = await asyncio.to_thread(RayLoad, cluster.cluster.address, client_settings(config))
    try:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_agent(ctx, settings)

        verdict = await judge(
            config, out, "agent", programme, ("agent",), remote=(load,), route=load.target
        )
    finally:
        load.close()
    checks = {c["id"]: c for c in verdict.data["checks"]}
    assert checks["agent.one_arg.required"]["status"] == "pass", checks["agent.one_arg.required"]
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    lines = [
        json.loads(line)
        for path in (out / "requests").glob("agent.*.jsonl")
        for line in path.read_text().splitlines()
    ]
    tags = {line["request_id"].split("-")[1] for line in lines}  # each client's own run tag
    assert len(lines) >= 4
    assert len(tags) == 3
