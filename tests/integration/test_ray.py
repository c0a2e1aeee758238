"""`golive env --ray`: every node of a real (loopback) Ray cluster reports through the Jobs
API. Each node gets its own `nvidia-smi` on PATH, printing a real H200 capture (one node's
edited to an R575 driver), since this machine has no GPU; the collector runs unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CHAIN_INPUTS, RAY_GPU_CURVE
from golive.bundle.store import Bundle
from golive.checks.context import CheckContext
from golive.checks.env.collect import EnvEvidence, run_env
from golive.cli.main import main
from golive.config_sources import load_config, variable_of
from golive.evidence.ray_env import RaySource
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Status
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.ray_cluster import CURVE, LoopbackCluster, split
from tests.helpers.scenario import FAKE_CAPACITY


async def _env(address: str, out: Path, **ray: Any) -> Verdict:
    evidence = EnvEvidence(ray=RaySource(address, **ray))

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_env(ctx, evidence)

    return await judge(load_config(None, {}), out, "env", programme, ("env",), require_target=False)


def _checks(verdict: Verdict) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in verdict.data["checks"]}


@pytest.mark.tampers_bundle
async def test_every_node_reports_and_a_mixed_driver_is_rebuild(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """Every node of the Ray cluster reports its host and container facts; the one on an R575 driver
    makes the chain rebuild."""
    verdict = await _env(
        ray_cluster.address, tmp_path / "b", expect_nodes=3, timeout_s=60, container=True
    )
    checks = _checks(verdict)
    names = [ray_cluster.node_name(n) for n in ("head", "worker-1", "worker-2")]
    for name in names:
        assert (tmp_path / f"b/environment/host-{name}.json").exists()
        assert (tmp_path / f"b/environment/container-{name}.json").exists()  # --ray-container
    assert checks["environment.node_count"]["status"] == "pass"
    assert checks["environment.node_count"]["measurements"]["reported_nodes"] == 3
    driver = checks["environment.host_driver"]
    assert driver["status"] == "fail"
    assert f"{names[2]}: R575" in driver["summary"]
    assert verdict.data["outcome"] == "rebuild"
    # every node's serving container is judged as one build (here one Python: they agree)
    saved = json.loads((tmp_path / "b" / CHAIN_INPUTS).read_text())
    assert sorted(saved["node_containers"]) == sorted(
        f"environment/container-{n}.json" for n in names
    )
    assert "differs across" not in checks["environment.container_cuda"]["summary"]
    # nodes whose container runtimes differ are caught from the files, whatever the verdict
    for name, runtime in ((names[0], "kubernetes"), (names[1], "docker")):
        node = tmp_path / "b" / f"environment/container-{name}.json"
        node.write_text(json.dumps({**json.loads(node.read_text()), "container_runtime": runtime}))
    Bundle(tmp_path / "b").seal()
    again = rederive(tmp_path / "b")
    assert not again.agrees
    cuda = next(c for c in again.checks if c.id == "environment.container_cuda")
    assert cuda.status is Status.FAIL
    assert f"environment/container-{names[1]}.json" in cuda.summary


async def test_fewer_nodes_than_declared_is_a_finding(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """A cluster with fewer alive nodes than --expect-nodes fails the node count, saying both
    numbers."""
    verdict = await _env(ray_cluster.address, tmp_path / "b", expect_nodes=4, timeout_s=60)
    count = _checks(verdict)["environment.node_count"]
    assert count["status"] == "fail"
    assert "3 alive node(s), but 4 were declared" in count["summary"]


async def test_run_collects_the_chain_from_every_node(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """`golive run --chain-ray` reads every node of the vLLM Ray cluster itself (no `golive
    env` first, no file copied by hand): the R575 node makes it rebuild, and no request is
    sent to a deployment that must be rebuilt."""
    state = FakeState()
    out = tmp_path / "run"
    async with fake_vllm(state) as url:
        argv = [
            "run", "--target", url, "--chain-ray", ray_cluster.address, "--expect-nodes", "3",
            "--ray-timeout", "60", "--out", str(out),
        ]  # fmt: skip
        code = await asyncio.to_thread(main, argv)
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    assert code == 13
    assert checks["environment.node_count"]["measurements"]["reported_nodes"] == 3
    assert (
        f"{ray_cluster.node_name('worker-2')}: R575" in checks["environment.host_driver"]["summary"]
    )
    assert state.chats == 0


async def test_capacity_samples_every_nodes_gpu_memory(
    ray_cluster: LoopbackCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`golive capacity --chain-ray`: a sampler on each of the three nodes (no sampler
    started by hand, no CSV copied back) reads its GPU memory over the phases — each node's
    nvidia-smi replays a real H200's curve — and capacity.gpu_memory gives every node's peak
    by phase from the rows it sampled, the samplers' lines kept in the bundle."""
    out = tmp_path / "b"
    for key, value in FAKE_CAPACITY.items():  # the small windows, as GOLIVE_* variables
        monkeypatch.setenv(variable_of(key), str(value).lower())
    async with fake_vllm(FakeState()) as url:
        argv = ["capacity", "--target", url, "--chain-ray", ray_cluster.address, "--out", str(out)]
        code = await asyncio.to_thread(main, argv)
    assert code in (0, 10, 11), code
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    memory = checks["capacity.gpu_memory"]
    assert memory["status"] == "pass", memory["summary"]
    replayed = {float(line.split(",")[1]) for line in CURVE.read_text().splitlines()[1:]}
    lines = [json.loads(line) for line in (out / RAY_GPU_CURVE).read_text().splitlines()]
    for node in ("head", "worker-1", "worker-2"):
        name = ray_cluster.node_name(node)
        peak = memory["measurements"][f"ray-{name}:concurrency:gpu0_used_mib"]
        assert round(peak, 1) in {round(v, 1) for v in replayed}
        node_id = ray_cluster.nodes[node].node_id
        rows = [r for line in lines if line.get("node_id") == node_id for r in line["rows"]]
        assert len(rows) >= 2  # every half second while the phases ran
        assert {r["gpu0_total_mib"] for r in rows} == {143771.0}
        assert (out / f"memory/gpu-ray-{name}.csv").is_file()
    # judged again by golive decide from the samplers' lines: no reviewer's word needed
    again = rederive(out)
    assert again.agrees, again.problems
    assert "capacity.gpu_memory" in again.rejudged_ids
    assert "capacity.gpu_memory" not in again.as_sealed


async def test_run_reads_the_chain_and_every_nodes_gpu_memory(
    ray_cluster: LoopbackCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30's first real run on Ray: `golive run --chain-ray ... --sample-gpus` reads the
    chain from every node and each GPU node's memory over the pressure phases — no `golive
    env` beforehand, no sampler started by hand, no CSV copied — through the whole programme,
    and golive decide judges the nodes and the curves again from the bundle. (worker-2 is on
    R575 in the other tests: here its nvidia-smi says R580, so the run is not stopped there.)"""
    xml = ray_cluster.root / "worker-2/smi.xml"
    r575 = xml.read_text()
    xml.write_text(r575.replace("575.57.08", "580.159.04"))
    out = tmp_path / "run"
    # the subject is the chain and the GPU curves: smoke's other request classes (a 20 s
    # sustained run by default) are not
    for key, value in {**FAKE_CAPACITY, "smoke.classes": False}.items():
        monkeypatch.setenv(variable_of(key), str(value).lower())
    try:
        async with fake_vllm(FakeState()) as url:
            argv = [
                "run", "--target", url, "--chain-ray", ray_cluster.address, "--expect-nodes", "3",
                "--ray-timeout", "60", "--sample-gpus", "--out", str(out),
            ]  # fmt: skip
            code = await asyncio.to_thread(main, argv)
    finally:
        xml.write_text(r575)
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    assert checks["environment.node_count"]["measurements"]["reported_nodes"] == 3
    memory = checks["capacity.gpu_memory"]
    assert memory["status"] == "pass", memory["summary"]
    for node in ("head", "worker-1", "worker-2"):
        name = ray_cluster.node_name(node)
        assert any(k.startswith(f"ray-{name}:") for k in memory["measurements"]), name
    again = rederive(out)
    assert again.agrees, again.problems
    assert {"environment.node_count", "capacity.gpu_memory"} <= set(again.rejudged_ids)
    assert code in (0, 10, 11), code


@pytest.mark.tampers_bundle
async def test_a_node_removed_mid_collection_is_no_data(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """A fourth node joins and goes again (the cluster's three stay for the tests after it):
    its nvidia-smi stalls; the node goes while it does.
    decide judges the node checks again from environment/ray-nodes.json: a verdict edited to
    drop the missing node's check, re-sealed, is not agreed to and the node is no_data again
    (these checks were taken as sealed before)."""
    leaving = ray_cluster.add("leaving", delay_s=60)
    run = asyncio.create_task(_env(ray_cluster.address, tmp_path / "b", timeout_s=45))
    started = ray_cluster.root / "leaving/started"
    for _ in range(600):
        if started.exists() or run.done():
            break
        await asyncio.sleep(0.1)
    assert started.exists(), "the collector never reached the leaving node"
    ray_cluster.cluster.remove_node(leaving)
    verdict = await asyncio.wait_for(run, 240)
    checks = _checks(verdict)
    gone = checks[f"environment.node.{ray_cluster.node_name('leaving')}"]
    assert gone["status"] == "no_data"
    assert "did not report" in gone["summary"]
    assert verdict.data["outcome"] != "go-live"
    root = tmp_path / "b"
    again = rederive(root)
    assert again.agrees, again.problems
    assert "environment.ray" in again.rejudged
    edited = json.loads((root / "verdict.json").read_text())
    edited["checks"] = [c for c in edited["checks"] if c["id"] != gone["id"]]
    (root / "verdict.json").write_text(json.dumps(edited))
    Bundle(root).seal()
    tampered = rederive(root)
    assert not tampered.agrees
    assert any(d.startswith(f"{gone['id']}: re-derived only") for d in tampered.problems)
    assert next(c for c in tampered.checks if c.id == gone["id"]).status is Status.NO_DATA
    # the node record deleted, the node checks kept passing: missing evidence, named
    (root / "environment/ray-nodes.json").unlink()
    edited["checks"] = [
        {**c, "status": "pass"} if c["id"].startswith("environment.node") else c
        for c in edited["checks"]
    ]
    (root / "verdict.json").write_text(json.dumps(edited))
    Bundle(root).seal()
    deleted = rederive(root)
    assert not deleted.agrees
    assert any("environment/ray-nodes.json" in p for p in deleted.problems), deleted.problems
    count = next(c for c in deleted.checks if c.id == "environment.node_count")
    assert count.status is Status.NO_DATA


@pytest.mark.parametrize(
    ("total", "parts", "shares"),
    [(4, 3, [2, 1, 1]), (1, 3, [1]), (3, 3, [1, 1, 1]), (400, 3, [134, 133, 133])],
)
def test_a_window_splits_evenly_over_the_clients(total: int, parts: int, shares: list[int]) -> None:
    """A window's concurrency splits over the client actors as evenly as whole requests allow."""
    assert split(total, parts) == shares
