"""GPU memory over the pressure phases from the DCGM exporter through Prometheus
(`capacity.prometheus_url`): no sampler started on each node, no CSV copied back. The
Prometheus here is a fake answering the range-query API with DCGM-shaped series, since no
GPU node runs here; golive's query, its selector and the merge by phase are the real ones."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from golive.cli.main import main
from golive.config_sources import variable_of
from golive.evidence.dcgm import node_curves
from tests.helpers.fakes import serve_app
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import FAKE_CAPACITY

SELECTOR = 'namespace="llm",pod=~"vllm-.*"'


def _series(metric: str, host: str, gpu: str, values: list[tuple[float, float]]) -> dict[str, Any]:
    labels = {"__name__": metric, "gpu": gpu, "Hostname": host, "namespace": "llm"}
    return {"metric": labels, "values": [[t, str(v)] for t, v in values]}


@asynccontextmanager
async def fake_prometheus(queries: list[dict[str, str]]) -> AsyncIterator[str]:
    """DCGM series for two GPUs of node gpu-0, every 2 s over whatever span is asked."""

    async def query_range(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        start, end = float(request.query["start"]), float(request.query["end"])
        times = [start + 2 * i for i in range(int((end - start) // 2) + 1)]
        used = "FB_USED" in request.query["query"]
        result = [
            _series(
                request.query["query"].split("{")[0],
                "gpu-0",
                gpu,
                [
                    (t, (60_000 + 1000 * n if used else 80_000 - 1000 * n))
                    for n, t in enumerate(times)
                ],
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
    phase is in capacity.gpu_memory from the merged curve."""
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
