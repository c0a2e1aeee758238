"""GPU memory over the pressure phases from the DCGM exporter through Prometheus
(`capacity.prometheus_url`): no sampler started on each node, no CSV copied back. The
Prometheus here is a fake answering the range-query API with DCGM-shaped series, since no
GPU node runs here; golive's query, its selector and the merge by phase are the real ones."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from golive.bundle.layout import DCGM_FREE, DCGM_USED, NODE_CURVES
from golive.bundle.store import Bundle
from golive.cli.main import main
from golive.config_sources import variable_of
from golive.evidence.dcgm import node_curves
from golive.orchestration.rederive import rederive
from golive.results import Status
from tests.helpers.fakes import serve_app
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import FAKE_CAPACITY

SELECTOR = 'namespace="llm",pod=~"vllm-.*"'


def _series(metric: str, host: str, gpu: str, values: list[tuple[float, float]]) -> dict[str, Any]:
    labels = {"__name__": metric, "gpu": gpu, "Hostname": host, "namespace": "llm"}
    return {"metric": labels, "values": [[t, str(v)] for t, v in values]}


@asynccontextmanager
async def fake_prometheus(
    queries: list[dict[str, str]],
    used: Callable[[int], float] = lambda n: 60_000 + 1000 * n,
    total_mib: float = 140_000.0,
    step_s: float = 2.0,
) -> AsyncIterator[str]:
    """DCGM series for two GPUs of node gpu-0, every `step_s` over whatever span is asked:
    the n-th point holds `used(n)` MiB (by default rising 1,000 MiB a point) of `total_mib`."""

    async def query_range(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        start, end = float(request.query["start"]), float(request.query["end"])
        times = [start + step_s * i for i in range(int((end - start) // step_s) + 1)]
        is_used = "FB_USED" in request.query["query"]
        result = [
            _series(
                request.query["query"].split("{")[0],
                "gpu-0",
                gpu,
                [(t, used(n) if is_used else total_mib - used(n)) for n, t in enumerate(times)],
            )
            for gpu in ("0", "1")
        ]
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/api/v1/query_range", query_range)
    async with serve_app(app) as url:
        yield url


def test_node_curves_pair_used_with_free() -> None:
    """Each node gets one curve; a GPU's total is used + free at the same instant."""
    used = [_series("DCGM_FI_DEV_FB_USED", "gpu-0", "0", [(1.0, 100.0), (3.0, 150.0)])]
    free = [_series("DCGM_FI_DEV_FB_FREE", "gpu-0", "0", [(1.0, 900.0)])]
    curve = node_curves(used, free)["gpu-0"].splitlines()
    assert curve[0] == "wall_time,gpu0_used_mib,gpu0_total_mib"
    assert curve[1] == "1.0,100.0,1000.0"
    assert curve[2] == "3.0,150.0,"  # no free sample then: the total is not made up


async def test_capacity_reads_gpu_memory_from_dcgm_through_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`golive capacity --prometheus-url --dcgm-selector`: both range queries carry the
    selector and the run's span, the exporter's answers are kept, and each GPU's peak by
    phase is in capacity.gpu_memory from the merged curve, which golive decide judges again
    from the kept answers."""
    queries: list[dict[str, str]] = []
    out = tmp_path / "b"
    async with fake_vllm(FakeState()) as url, fake_prometheus(queries) as prometheus:
        argv = ["capacity", "--target", url, "--out", str(out)]
        argv += ["--prometheus-url", prometheus, "--dcgm-selector", SELECTOR]
        for key, value in FAKE_CAPACITY.items():  # the small windows, as GOLIVE_* variables
            monkeypatch.setenv(variable_of(key), str(value).lower())
        code = await asyncio.to_thread(main, argv)
    assert code in (0, 10, 11), code
    assert [q["query"] for q in queries] == [
        f"DCGM_FI_DEV_FB_USED{{{SELECTOR}}}",
        f"DCGM_FI_DEV_FB_FREE{{{SELECTOR}}}",
    ]
    verdict = json.loads((out / "verdict.json").read_text())
    phases = json.loads((out / "metrics/capacity-phases.json").read_text())
    assert abs(float(queries[0]["start"]) - phases[0]["start"]) < 0.01
    assert abs(float(queries[0]["end"]) - phases[-1]["end"]) < 0.01
    checks = {c["id"]: c for c in verdict["checks"]}
    memory = checks["capacity.gpu_memory"]
    assert memory["status"] == "pass", memory["summary"]
    assert any(k.startswith("dcgm-gpu-0:concurrency:gpu1_used_mib") for k in memory["measurements"])
    curve = (out / "memory/gpu-dcgm-gpu-0.csv").read_text().splitlines()
    assert curve[0] == "wall_time,phase,gpu0_used_mib,gpu1_used_mib"
    assert any(",concurrency," in line for line in curve)
    assert json.loads((out / "memory/dcgm-fb-used.json").read_text())["status"] == "success"
    # judged again by golive decide from the exporter's answers: no reviewer's word needed
    again = rederive(out)
    assert again.agrees, again.problems
    assert "capacity.gpu_memory" in again.rejudged_ids
    assert "capacity.gpu_memory" not in again.as_sealed
    # the table's rule lines: a section that found a problem is not also "section-passed"
    shown = capsys.readouterr().out.splitlines()
    rules = [
        line
        for line in shown
        if line.split(":")[0] in {r["outcome"] for r in verdict["rules_fired"]}
    ]
    assert rules
    if verdict["outcome"] != "section-passed":
        assert not any(line.startswith("section-passed:") for line in shown)
    assert not any(line.endswith("()") for line in rules)


async def test_a_prometheus_without_a_selector_is_refused(tmp_path: Path) -> None:
    """A shared Prometheus holds every team's GPUs: no selector, no run (exit 2, no bundle)."""
    argv = ["capacity", "--target", "http://127.0.0.1:9", "--out", str(tmp_path / "b")]
    code = await asyncio.to_thread(main, [*argv, "--prometheus-url", "http://127.0.0.1:9090"])
    assert code == 2
    assert not (tmp_path / "b").exists()


@pytest.mark.tampers_bundle
async def test_decide_holds_the_node_curves_to_the_kept_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """capacity.gpu_memory is judged again from the exporter's answers, not the merged curve:
    an answer edited to show less memory, or the record of what the run read deleted, each
    re-sealed, is not agreed to — never a better check."""
    queries: list[dict[str, str]] = []
    out = tmp_path / "b"
    async with fake_vllm(FakeState()) as url, fake_prometheus(queries) as prometheus:
        argv = ["capacity", "--target", url, "--out", str(out)]
        argv += ["--prometheus-url", prometheus, "--dcgm-selector", SELECTOR]
        for key, value in FAKE_CAPACITY.items():
            monkeypatch.setenv(variable_of(key), str(value).lower())
        code = await asyncio.to_thread(main, argv)
    assert code in (0, 10, 11), code
    assert rederive(out).agrees
    used = out / DCGM_USED
    answer = json.loads(used.read_text())
    for series in answer["data"]["result"]:
        series["values"] = [[t, "1000"] for t, _ in series["values"]]
    used.write_text(json.dumps(answer))
    Bundle(out).seal()
    edited = rederive(out)
    assert not edited.agrees
    assert any(p.startswith("capacity.gpu_memory") for p in edited.problems), edited.problems
    (out / NODE_CURVES).unlink()
    Bundle(out).seal()
    deleted = rederive(out)
    assert not deleted.agrees
    check = next(c for c in deleted.checks if c.id == "capacity.gpu_memory")
    assert check.status is Status.NO_DATA
    assert NODE_CURVES in check.summary
    # every node file deleted and the check dropped: the config still names the exporter
    for rel in (DCGM_USED, DCGM_FREE):
        (out / rel).unlink()
    verdict = json.loads((out / "verdict.json").read_text())
    verdict["checks"] = [c for c in verdict["checks"] if c["id"] != "capacity.gpu_memory"]
    (out / "verdict.json").write_text(json.dumps(verdict))
    Bundle(out).seal()
    gone = rederive(out)
    assert not gone.agrees
    assert any(NODE_CURVES in p for p in gone.problems), gone.problems


async def test_golive_off_the_gpu_hosts_judges_the_engine_gpus_on_dcgms_curves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """golive run from a machine without the engine's GPUs (no NVML here), the engine's
    startup log (a real two-H200 vLLM 0.24, TP=2) and the DCGM exporter's curves: capacity.memory
    judges both engine GPUs' headroom and growth on the exporter's series (it was no_data,
    "saw no GPU where golive ran"), and golive decide agrees from the kept answers."""
    out = tmp_path / "b"
    # 50 ms an answer (no death): golive's one core is not the bottleneck of the windows
    state = FakeState(model="qwen-gpu", kv_usage=0.3, fault="dies_above", die_above=1 << 30)
    log = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x2/startup.log"
    async with (
        fake_vllm(state) as url,
        fake_prometheus([], lambda n: 74_460.0 + n % 3, 143_771.0, 0.25) as prometheus,
    ):
        argv = ["capacity", "--target", url, "--out", str(out), "--log", str(log)]
        argv += ["--prometheus-url", prometheus, "--dcgm-selector", SELECTOR]
        for key, value in {**FAKE_CAPACITY, "capacity.duration_s": 6.0}.items():
            monkeypatch.setenv(variable_of(key), str(value).lower())
        code = await asyncio.to_thread(main, argv)
    assert code in (0, 10, 11), code
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    memory = checks["capacity.memory"]
    assert memory["status"] == "pass", memory["summary"]
    for gpu in ("gpu0", "gpu1"):
        assert memory["measurements"][f"dcgm-gpu-0:{gpu}_total_mib"] == 143_771
        # what it held less the 66.35 GiB KV pool's 70% the load left unused, of 143,771 MiB
        needed = (74_462.0 - 66.35 * 1024 * 0.7) / 143_771
        headroom = memory["measurements"][f"dcgm-gpu-0:{gpu}_headroom"]
        assert headroom == pytest.approx(1 - needed, abs=0.001)
    assert NODE_CURVES in memory["evidence"]
    again = rederive(out)
    assert again.agrees, again.problems
    assert "capacity.memory" in again.rejudged_ids


async def test_gpu_curve_files_of_one_name_are_kept_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--gpu-curve a/node-gpu.csv --gpu-curve b/node-gpu.csv` (each node's file under the
    name the docs give): both are kept, each under its own name, and judged again by decide
    (one used to overwrite the other's copy)."""
    files = []
    nodes = [("a", "node-gpu", 1000.0), ("b", "node-gpu", 2000.0)]
    nodes += [("c", "node gpu", 3000.0), ("d", "node_gpu", 4000.0)]  # alike once made safe
    for node, stem, used in nodes:
        (tmp_path / node).mkdir()
        now = time.time()
        rows = [f"{now - 5 + 0.5 * i},{used},143771" for i in range(200)]
        path = tmp_path / node / f"{stem}.csv"
        path.write_text("wall_time,gpu0_used_mib,gpu0_total_mib\n" + "\n".join(rows) + "\n")
        files += ["--gpu-curve", str(path)]
    out = tmp_path / "b-out"
    async with fake_vllm(FakeState()) as url:
        for key, value in FAKE_CAPACITY.items():
            monkeypatch.setenv(variable_of(key), str(value).lower())
        code = await asyncio.to_thread(
            main, ["capacity", "--target", url, "--out", str(out), *files]
        )
    assert code in (0, 10, 11), code
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    peaks = checks["capacity.gpu_memory"]["measurements"]
    assert peaks["node-gpu:concurrency:gpu0_used_mib"] == 1000.0
    assert peaks["node-gpu-1:concurrency:gpu0_used_mib"] == 2000.0
    assert peaks["node gpu:concurrency:gpu0_used_mib"] == 3000.0
    assert peaks["node_gpu-1:concurrency:gpu0_used_mib"] == 4000.0
    assert rederive(out).agrees
