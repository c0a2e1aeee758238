"""`golive env --ray`: every node of a real (loopback) Ray cluster reports through the Jobs
API. Each node gets its own `nvidia-smi` on PATH, printing a real H200 capture (one node's
edited to an R575 driver), since this machine has no GPU; the collector runs unchanged."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import read_lines, record_streams
from golive.checks.agent.collect import agent_settings, run_agent
from golive.checks.agent.select import cases_for
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.load_window import CLIENTS
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.checks.env.collect import EnvEvidence, run_env
from golive.config import load_config
from golive.evidence.ray_env import RaySource
from golive.pipeline import Verdict, client_settings, judge
from golive.results import CheckResult
from golive.target.server import RunningTarget
from tests.scenario import SMALL_REQUESTS

# Before Ray is imported: every Ray process, and this test's driver, stay on 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="needs golive[ray]")
from golive.traffic.ray_load import RayLoad, split  # noqa: E402 - needs Ray

DATA = Path(__file__).parent.parent / "data"
XML = (DATA / "gpu-h200-x1/nvidia-smi-q.xml").read_text()


def _fake_smi(directory: Path, xml: str, delay_s: float = 0.0) -> Path:
    """A directory holding an `nvidia-smi` that prints `xml` (after `delay_s`)."""
    directory.mkdir(parents=True)
    (directory / "smi.xml").write_text(xml)
    script = directory / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"touch {directory}/started\n"
        f"sleep {delay_s}\n"
        f'case "$*" in "-q -x") cat {directory}/smi.xml ;; "topo -m") echo "GPU0 X" ;; '
        "*) exit 1 ;; esac\n"
    )
    script.chmod(0o755)
    return directory


class LoopbackCluster:
    """A head and worker nodes of a real Ray cluster, on 127.0.0.1 only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._path = os.environ["PATH"]
        port = _free_port()
        self.address = f"http://127.0.0.1:{port}"
        self.cluster = self._with_smi(
            "head",
            XML,
            0.0,
            lambda: ray_cluster_utils.Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "include_dashboard": True,
                    "dashboard_host": "127.0.0.1",
                    "dashboard_port": port,
                    "node_ip_address": "127.0.0.1",
                },
            ),
        )
        self.nodes: dict[str, Any] = {"head": self.cluster.head_node}

    def _with_smi(self, name: str, xml: str, delay_s: float, start: Any) -> Any:
        """Start a node whose processes find this node's own nvidia-smi first on PATH."""
        smi = _fake_smi(self.root / name, xml, delay_s)
        os.environ["PATH"] = f"{Path(sys.executable).parent}:{smi}:{self._path}"
        try:
            return start()
        finally:
            os.environ["PATH"] = self._path

    def add(self, name: str, xml: str = XML, delay_s: float = 0.0) -> Any:
        node = self._with_smi(
            name,
            xml,
            delay_s,
            lambda: self.cluster.add_node(
                num_cpus=1, object_store_memory=80 << 20, node_ip_address="127.0.0.1"
            ),
        )
        self.nodes[name] = node
        return node

    def node_name(self, name: str) -> str:
        """The name golive gives a node: its hostname, with the Ray node id for twins."""
        return f"{socket.gethostname()}-{self.nodes[name].node_id[:8]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    root = Path(tempfile.mkdtemp(prefix="gr", dir="/tmp"))  # Ray's socket paths must be short
    saved = {"RAY_TMPDIR": os.environ.get("RAY_TMPDIR")}
    os.environ["RAY_TMPDIR"] = str(root / "ray")
    made = LoopbackCluster(root)
    try:
        made.add("worker-1")
        made.add("worker-2", XML.replace("580.159.04", "575.57.08"))
        yield made
    finally:
        made.cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)


async def _env(address: str, out: Path, **ray: Any) -> Verdict:
    evidence = EnvEvidence(ray=RaySource(address, **ray))

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_env(ctx, evidence)

    return await judge(load_config(None, {}), out, "env", programme, ("env",), require_target=False)


def _checks(verdict: Verdict) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in verdict.data["checks"]}


async def test_every_node_reports_and_a_mixed_driver_is_rebuild(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    verdict = await _env(
        cluster.address, tmp_path / "b", expect_nodes=3, timeout_s=60, container=True
    )
    checks = _checks(verdict)
    names = [cluster.node_name(n) for n in ("head", "worker-1", "worker-2")]
    for name in names:
        assert (tmp_path / f"b/environment/host-{name}.json").exists()
        assert (tmp_path / f"b/environment/container-{name}.json").exists()  # --ray-container
    assert checks["environment.node_count"]["status"] == "pass"
    assert checks["environment.node_count"]["measurements"]["reported_nodes"] == 3
    driver = checks["environment.host_driver"]
    assert driver["status"] == "fail"
    assert f"{names[2]}: R575" in driver["summary"]
    assert verdict.data["outcome"] == "rebuild"


async def test_fewer_nodes_than_declared_is_a_finding(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    verdict = await _env(cluster.address, tmp_path / "b", expect_nodes=4, timeout_s=60)
    count = _checks(verdict)["environment.node_count"]
    assert count["status"] == "fail"
    assert "3 alive node(s), but 4 were declared" in count["summary"]


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
    windows = [json.loads(line) for line in (out / CLIENTS).read_text().splitlines()]
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
    assert all(w["loop_lag_p99_ms"] is not None and w["cpu_share"] is not None for w in windows)
    records = [
        json.loads(line)
        for phase in ("concurrency", "sustained")
        for path in record_streams(out, f"capacity-{phase}")
        for line in read_lines(path)
    ]
    assert len(records) == sum(w["sent"] for w in windows)
    assert {r["label"].split("@")[1] for r in records} == set(load.names)
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    assert checks["golive.client_headroom"]["status"] == "pass", checks["golive.client_headroom"]
    assert checks["capacity.sustained"]["status"] in ("pass", "warn"), checks["capacity.sustained"]


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
    settings = agent_settings(config.agent, cases_for(config.agent))
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


async def test_a_node_removed_mid_collection_is_no_data(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """Runs last: it takes a node away. Its nvidia-smi stalls; the node goes while it does."""
    leaving = cluster.add("leaving", delay_s=60)
    run = asyncio.create_task(_env(cluster.address, tmp_path / "b", timeout_s=45))
    started = cluster.root / "leaving/started"
    for _ in range(600):
        if started.exists() or run.done():
            break
        await asyncio.sleep(0.1)
    assert started.exists(), "the collector never reached the leaving node"
    cluster.cluster.remove_node(leaving)
    verdict = await asyncio.wait_for(run, 240)
    checks = _checks(verdict)
    gone = checks[f"environment.node.{cluster.node_name('leaving')}"]
    assert gone["status"] == "no_data"
    assert "did not report" in gone["summary"]
    assert verdict.data["outcome"] != "go-live"


@pytest.mark.parametrize(
    ("total", "parts", "shares"),
    [(4, 3, [2, 1, 1]), (1, 3, [1]), (3, 3, [1, 1, 1]), (400, 3, [134, 133, 133])],
)
def test_a_window_splits_evenly_over_the_clients(total: int, parts: int, shares: list[int]) -> None:
    assert split(total, parts) == shares
