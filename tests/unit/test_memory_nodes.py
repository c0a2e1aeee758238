"""`capacity.memory` judged where golive ran off the GPU hosts (issue 30 §4): the engine's
GPUs from the Ray nodes' samplers' lines or the DCGM exporter's answers the bundle keeps,
labelled by phase from the run's timeline. The real two-H200 capture (vLLM 0.24, TP=2) is
replayed as the nodes' rows; golive's own curve keeps only the engine's gauges."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_PHASES,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    DCGM_FREE,
    DCGM_USED,
    EFFECTIVE_CONFIG,
    GPU_DEVICES,
    MEMORY_CURVE,
    NODE_CURVES,
    RAY_GPU_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory import CHECK, judge_memory
from golive.checks.capacity.node_curves import asked_node_curves, judge_gpu_memory
from golive.config import GoliveConfig
from golive.results import Status
from tests.helpers.record_lines import BARE

CAPTURE = Path(__file__).parents[1] / "data" / "vllm-gpu-0.24-h200x2"
H200_MIB = 143771
T0 = 1_800_000_000.0  # the run's wall clock at golive's first curve row
REMOTE = "http://vllm.llm.svc:8000"
MARKER = "GOLIVE-GPU-CURVE"


def capture_rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((CAPTURE / "memory-capacity.csv").read_text())))


def gauges_only(kv_full: bool = False) -> str:
    """golive's own curve off the GPU host: the engine's gauges, no GPU column (`kv_full`:
    one sustained sample of the KV cache at 97%)."""
    out = io.StringIO()
    keep = ["t_s", "phase", "kv_cache_usage_perc"]
    writer = csv.DictWriter(out, fieldnames=keep, extrasaction="ignore")
    writer.writeheader()
    rows = capture_rows()
    if kv_full:
        rows[360]["kv_cache_usage_perc"] = "0.97"
    writer.writerows(rows)
    return out.getvalue()


def timeline() -> list[dict[str, Any]]:
    """Each phase's wall-clock span, from the capture's rows."""
    spans: dict[str, list[float]] = {}
    for row in capture_rows():
        spans.setdefault(row["phase"], []).append(T0 + float(row["t_s"]))
    return [{"phase": p, "start": min(ts), "end": max(ts)} for p, ts in spans.items()]


def node_rows(scale: float = 1.0, gpus: tuple[int, ...] = (0, 1)) -> list[dict[str, Any]]:
    """The capture's GPU columns as one node's sampler rows (wall clock, used and total)."""
    return [
        {
            "wall_time": T0 + float(row["t_s"]),
            **{f"gpu{i}_used_mib": float(row[f"gpu{i}_used_mib"]) * scale for i in gpus},
            **{f"gpu{i}_total_mib": H200_MIB for i in gpus},
        }
        for row in capture_rows()
    ]


def ray_lines(nodes: Mapping[str, list[dict[str, Any]]], gpu_nodes: int | None = None) -> str:
    start = {
        "alive_nodes": len(nodes) + 1,
        "gpu_nodes": len(nodes) if gpu_nodes is None else gpu_nodes,
    }
    lines = [start] + [
        {"node_id": f"{name}-id", "hostname": name, "rows": rows, "error": None}
        for name, rows in nodes.items()
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def bundle(tmp_path: Path, ray: str | None = None, phases: Any = None, dcgm: bool = False) -> Path:
    root = tmp_path / "bundle"
    for folder in ("memory", "environment", "metrics"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / MEMORY_CURVE).write_text(gauges_only())
    (root / GPU_DEVICES).write_text("[]")  # golive's host: no GPU
    shutil.copy(CAPTURE / "startup.log", root / STARTUP_LOG)
    (root / CAPACITY_PHASES).write_text(json.dumps(timeline() if phases is None else phases))
    if ray is not None:
        (root / RAY_GPU_CURVE).write_text(ray)
    record = {"gpu_curves": [], "ray": ray is not None, "dcgm": dcgm, "problems": []}
    (root / NODE_CURVES).write_text(json.dumps(record))
    return root


def config_for(root: Path, **capacity: Any) -> GoliveConfig:
    """The config an honest run wrote beside the bundle's record: as many --gpu-curve files as
    the record accounts for (copies listed, files it could not read)."""
    path = root / NODE_CURVES
    record = json.loads(path.read_text()) if path.is_file() else {}
    unread = [p for p in record.get("problems", []) if p.startswith("--gpu-curve ")]
    given = len(record.get("gpu_curves", [])) + len(unread)
    capacity.setdefault("gpu_curves", [f"/nodes/{i}.csv" for i in range(given)])
    return GoliveConfig.model_validate({"target": {"url": REMOTE}, "capacity": capacity})


def judged(root: Path, **capacity: float) -> tuple[Status, str, Mapping[str, Any], list[str]]:
    config = config_for(root, **capacity)
    [result] = judge_memory(BundleReader(root), config)
    assert result.id == CHECK
    return result.status, result.summary, result.measurements, list(result.evidence)


def test_the_ray_nodes_curves_judge_the_engine_gpus_off_the_gpu_host(tmp_path: Path) -> None:
    """golive off the GPU host, the Ray node's sampler rows of the real capture: both engine GPUs are judged as on the host (a pass, each GPU's headroom named under its node), from the samplers' raw lines and the phase timeline."""
    root = bundle(tmp_path, ray_lines({"gpu-node-a": node_rows()}))
    status, summary, m, files = judged(root)
    assert status is Status.PASS, summary
    assert m["ray-gpu-node-a:gpu0_total_mib"] == H200_MIB
    # as on the host: 74,462 MiB held of 143,771, the 66.35 GiB cache at most 0.36% used
    expected = 1 - (74461.9375 - 66.35 * 1024 * (1 - 0.0035836606051239395)) / H200_MIB
    assert m["ray-gpu-node-a:gpu1_headroom"] == pytest.approx(expected, abs=1e-4)
    assert "ray-gpu-node-a:gpu0_sustained_slope_per_s" in m
    assert RAY_GPU_CURVE in files
    assert CAPACITY_PHASES in files
    # without the nodes' lines (the record says the run read them): unmeasured, naming them
    (root / RAY_GPU_CURVE).unlink()
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert f"{RAY_GPU_CURVE} is missing" in summary
    # without the record too it is what it was: unmeasured off the GPU host
    (root / NODE_CURVES).unlink()
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "saw no GPU where golive ran" in summary


def test_a_node_gpu_that_fills_under_load_is_a_limit_named_by_its_node(tmp_path: Path) -> None:
    """The same rows with the KV cache filled under sustained load and a stated minimum above what the node GPUs then kept: a limit naming the node's GPU, as golive's own NVML curve would."""
    root = bundle(tmp_path, ray_lines({"gpu-node-a": node_rows()}))
    (root / MEMORY_CURVE).write_text(gauges_only(kv_full=True))
    status, summary, _, _ = judged(root, min_memory_headroom=0.55)
    assert status is Status.WARN
    assert "ray-gpu-node-a GPU0 at its busiest needed 70.7 of its 140.4 GiB" in summary
    assert "with the nodes' curves no lower level is shown" in summary


@pytest.mark.parametrize(
    ("ray", "phases", "why"),
    [
        # two GPU nodes counted at the start, one node's lines left
        (lambda: ray_lines({"gpu-node-a": node_rows()}, gpu_nodes=2), None, "never reported"),
        # the start line counting the GPU nodes removed
        (
            lambda: "".join(ray_lines({"a": node_rows()}).splitlines(keepends=True)[1:]),
            None,
            "no start line counting",
        ),
        # one GPU of the TP=2 engine sampled
        (lambda: ray_lines({"a": node_rows(gpus=(0,))}), None, "its launch runs on 2"),
        # the GPUs hold less than the engine printed it allocated: not the engine's
        (
            lambda: ray_lines({"a": node_rows(scale=0.5)}),
            None,
            "0 GPU(s) of one source's sampled nodes",
        ),
        # no timeline: the rows' phases are unknown
        (lambda: ray_lines({"a": node_rows()}), [], "no phase timeline"),
        (lambda: ray_lines({"a": node_rows()}), [{"phase": "sustained"}], "no phase timeline"),
        # the node's rows stop a minute before the sustained window ended
        (lambda: ray_lines({"a": node_rows()[:-60]}), None, "the curve stopped early"),
    ],
)
def test_node_curves_that_cannot_show_every_engine_gpu_are_unmeasured(
    tmp_path: Path, ray: Any, phases: Any, why: str
) -> None:
    """A GPU node that never reported, a removed node count, fewer engine GPUs than the launch's parallel size, GPUs that are not the engine's, a missing timeline: no_data naming it, never a pass on the GPUs that came."""
    status, summary, _, _ = judged(bundle(tmp_path, ray(), phases))
    assert status is Status.NO_DATA
    assert why in summary


def test_a_node_gpu_whose_total_changes_is_not_one_gpus_curve(tmp_path: Path) -> None:
    """A sampled total that changes within a node's rows: no_data, the curve is not one GPU's."""
    rows = node_rows()
    rows[5]["gpu1_total_mib"] = 81559
    status, summary, _, _ = judged(bundle(tmp_path, ray_lines({"a": rows})))
    assert status is Status.NO_DATA
    assert "ray-a GPU1: its memory total was sampled as" in summary


def _prometheus(metric: str, rows: list[dict[str, Any]], free: bool) -> str:
    result = [
        {
            "metric": {"__name__": metric, "Hostname": "gpu-node-b", "gpu": str(i)},
            "values": [
                [
                    r["wall_time"],
                    str(r[f"gpu{i}_total_mib"] - r[f"gpu{i}_used_mib"])
                    if free
                    else str(r[f"gpu{i}_used_mib"]),
                ]
                for r in rows[::10]  # the exporter's 2 s step
            ],
        }
        for i in (0, 1)
    ]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def test_the_dcgm_exporters_answers_judge_the_engine_gpus(tmp_path: Path) -> None:
    """The DCGM exporter's used and free series kept in the bundle judge the engine's GPUs as the Ray samplers' do; its answers removed, the check is unmeasured again."""
    root = bundle(tmp_path, dcgm=True)
    rows = node_rows()
    (root / DCGM_USED).write_text(_prometheus("DCGM_FI_DEV_FB_USED", rows, free=False))
    (root / DCGM_FREE).write_text(_prometheus("DCGM_FI_DEV_FB_FREE", rows, free=True))
    status, summary, m, files = judged(root)
    assert status is Status.PASS, summary
    assert m["dcgm-gpu-node-b:gpu1_total_mib"] == H200_MIB
    assert DCGM_USED in files
    assert DCGM_FREE in files
    (root / DCGM_FREE).write_text('{"status": "error", "error": "timeout"}')
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "the query failed (timeout)" in summary


def test_golive_on_the_engine_host_is_judged_on_its_own_curve(tmp_path: Path) -> None:
    """With golive's own NVML GPUs the engine's, the nodes' curves do not replace them: the measurements are the host's GPUs by index."""
    root = bundle(tmp_path, ray_lines({"a": node_rows(scale=0.5)}))
    (root / MEMORY_CURVE).write_text((CAPTURE / "memory-capacity.csv").read_text())
    host = json.loads((CAPTURE / "host-h200x2.json").read_text())
    own = [{k: g[k] for k in ("index", "name", "uuid", "memory_total_mib")} for g in host["gpus"]]
    (root / GPU_DEVICES).write_text(json.dumps(own))
    config = GoliveConfig.model_validate({"target": {"url": "http://127.0.0.1:8000"}})
    [result] = judge_memory(BundleReader(root), config)
    assert result.status is Status.PASS, result.summary
    assert "gpu0_headroom" in result.measurements
    assert not any(k.startswith("ray-") for k in result.measurements)


def _copies(root: Path, files: dict[str, str], problems: list[str] | None = None) -> None:
    """`--gpu-curve` copies as the run keeps them, and the record naming them."""
    for name, text in files.items():
        (root / f"memory/node-curve-{name}.csv").write_text(text)
    record = {
        "gpu_curves": [{"name": n, "file": f"memory/node-curve-{n}.csv"} for n in files],
        "ray": False,
        "dcgm": False,
        "problems": problems or [],
    }
    (root / NODE_CURVES).write_text(json.dumps(record))


def _with_copy(root: Path, name: str, text: str) -> None:
    """A `--gpu-curve` copy beside the Ray lines, listed in the record as the run lists one."""
    (root / f"memory/node-curve-{name}.csv").write_text(text)
    record = json.loads((root / NODE_CURVES).read_text())
    record["gpu_curves"] = [{"name": name, "file": f"memory/node-curve-{name}.csv"}]
    (root / NODE_CURVES).write_text(json.dumps(record))


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_gpu_curve_files_judge_the_engine_gpus_from_their_copies(tmp_path: Path) -> None:
    """Two nodes' `--gpu-curve` files (one GPU of the TP=2 engine each): capacity.memory judges both from the copies the bundle keeps, and capacity.gpu_memory gives each node's peak by phase; a problem the run met (a third file it could not read) leaves both unmeasured."""
    root = bundle(tmp_path)
    _copies(root, {"node1": _csv(node_rows(gpus=(0,))), "node2": _csv(node_rows(gpus=(1,)))})
    status, summary, m, _ = judged(root)
    assert status is Status.PASS, summary
    assert {"node1:gpu0_headroom", "node2:gpu1_headroom"} <= set(m)
    [gpu_memory] = judge_gpu_memory(BundleReader(root), config_for(root))
    assert gpu_memory.status is Status.PASS
    assert gpu_memory.measurements["node2:sustained:gpu1_used_mib"] == pytest.approx(
        74461.9, abs=0.1
    )
    unread = "--gpu-curve /n3/node3.csv: cannot be read (No such file or directory)"
    _copies(
        root, {"node1": _csv(node_rows(gpus=(0,))), "node2": _csv(node_rows(gpus=(1,)))}, [unread]
    )
    assert judged(root)[0] is Status.NO_DATA
    [gpu_memory] = judge_gpu_memory(BundleReader(root), config_for(root))
    assert gpu_memory.status is Status.NO_DATA
    assert unread in gpu_memory.summary


def test_a_curve_copy_deleted_or_named_twice_is_never_judged(tmp_path: Path) -> None:
    """A copy the record names but the bundle lacks, or two curves under one name (their rows could not be told apart): both checks unmeasured, naming it."""
    root = bundle(tmp_path)
    _copies(root, {"node1": _csv(node_rows())})
    (root / "memory/node-curve-node1.csv").unlink()
    for [result] in (
        judge_gpu_memory(BundleReader(root), config_for(root)),
        judge_memory(BundleReader(root), config_for(root)),
    ):
        assert result.status is Status.NO_DATA
        assert "a --gpu-curve copy is missing" in result.summary
    root = bundle(tmp_path / "twice", ray_lines({"a": node_rows()}))
    _with_copy(root, "ray-a", _csv(node_rows()))
    [result] = judge_gpu_memory(BundleReader(root), config_for(root))
    assert result.status is Status.NO_DATA
    assert "curves named twice: ray-a" in result.summary


def _on_host(tmp_path: Path) -> Path:
    """golive on the engine's host (its NVML curve and inventory) with a Ray node's rows too."""
    root = bundle(tmp_path, ray_lines({"a": node_rows()}))
    (root / MEMORY_CURVE).write_text((CAPTURE / "memory-capacity.csv").read_text())
    host = json.loads((CAPTURE / "host-h200x2.json").read_text())
    own = [{k: g[k] for k in ("index", "name", "uuid", "memory_total_mib")} for g in host["gpus"]]
    (root / GPU_DEVICES).write_text(json.dumps(own))
    return root


@pytest.mark.parametrize(
    "inventory",
    [None, "[]", '[{"index": 0, "memory_total_mib": 0}]'],
    ids=["deleted", "empty", "garbled"],
)
def test_golive_own_gpus_are_never_swapped_for_the_nodes(
    tmp_path: Path, inventory: str | None
) -> None:
    """golive's own curve read GPUs: its inventory deleted, emptied or garbled is unmeasured, never judged again on the nodes' curves (which a reviewer could pick)."""
    root = _on_host(tmp_path)
    if inventory is None:
        (root / GPU_DEVICES).unlink()
    else:
        (root / GPU_DEVICES).write_text(inventory)
    status, summary, m, _ = judged(root)
    assert status is Status.NO_DATA, summary
    assert not any(k.startswith("ray-") for k in m)


def _sustained_records(root: Path, times: list[float], wall_s: float) -> None:
    (root / "requests").mkdir(exist_ok=True)
    rows = [{**BARE, "request_id": f"r{i}", "started_at": t} for i, t in enumerate(times)]
    (root / CAPACITY_SUSTAINED_REQUESTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / CAPACITY_SUSTAINED).write_text(json.dumps({"concurrency": 2, "wall_s": wall_s}))


def test_a_timeline_that_disagrees_with_the_sustained_window_is_unmeasured(tmp_path: Path) -> None:
    """The sustained span is held to its requests' send times and its window's length: cut short (to leave a leak or an early stop out), both checks are unmeasured."""
    root = bundle(tmp_path, ray_lines({"a": node_rows()}))
    span = next(s for s in timeline() if s["phase"] == "sustained")
    times = [span["start"] + 0.5 + i for i in range(int(span["end"] - span["start"]) - 1)]
    _sustained_records(root, times, span["end"] - span["start"])
    assert judged(root)[0] is Status.PASS
    cut = [s if s["phase"] != "sustained" else {**s, "end": s["start"] + 3.0} for s in timeline()]
    (root / CAPACITY_PHASES).write_text(json.dumps(cut))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "does not hold its requests' send times" in summary
    assert "shorter than the window" in summary
    [gpu_memory] = judge_gpu_memory(BundleReader(root), config_for(root))
    assert gpu_memory.status is Status.NO_DATA


def test_raw_node_evidence_the_record_does_not_list_is_never_left_out(tmp_path: Path) -> None:
    """Ray lines (one GPU node never reported) beside a record saying Ray was not read, a --gpu-curve copy the record does not name, a config naming the exporter with the record saying it was not read: each unmeasured, naming it."""
    root = bundle(tmp_path, ray_lines({"a": node_rows()}, gpu_nodes=2))
    record = json.loads((root / NODE_CURVES).read_text())
    (root / NODE_CURVES).write_text(json.dumps({**record, "ray": False}))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert f"does not list {RAY_GPU_CURVE}" in summary
    root = bundle(tmp_path / "copy")
    (root / "memory/node-curve-n1.csv").write_text(_csv(node_rows()))
    assert "does not list memory/node-curve-n1.csv" in judged(root)[1]
    root = bundle(tmp_path / "dcgm", ray_lines({"a": node_rows()}))
    config = GoliveConfig.model_validate(
        {
            "target": {"url": REMOTE},
            "capacity": {"prometheus_url": "http://prom:9090", "dcgm_selector": 'ns="llm"'},
        }
    )
    [result] = judge_memory(BundleReader(root), config)
    assert result.status is Status.NO_DATA
    assert "says the DCGM exporter was not read" in result.summary


def test_node_gpus_are_held_to_what_a_gpu_is(tmp_path: Path) -> None:
    """A total no GPU has (an edited exporter answer), a GPU seen by two sources counted once (TP=2, only GPU0 sampled twice), a GPU idle through the run that held the engine's size an hour before: none makes a pass."""
    rows = node_rows()
    for row in rows:
        row["gpu1_total_mib"] = 10_000_000
    status, summary, _, _ = judged(bundle(tmp_path, ray_lines({"a": rows})))
    assert status is Status.NO_DATA
    assert "is not a GPU's" in summary
    root = bundle(tmp_path / "twice", ray_lines({"gpu-node-b": node_rows(gpus=(0,))}))
    _with_copy(root, "gpu-node-b", _csv(node_rows(gpus=(0,))))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "1 GPU(s) of one source's sampled nodes" in summary
    rows = node_rows()
    idle = [{**r, "gpu1_used_mib": 2048.0} for r in rows]
    before = {**rows[0], "wall_time": T0 - 3600}  # the hour before the run: 74 GiB held
    status, summary, _, _ = judged(bundle(tmp_path / "idle", ray_lines({"a": [before, *idle]})))
    assert status is Status.NO_DATA
    assert "1 GPU(s) of one source's sampled nodes" in summary


def test_odd_curve_copies_are_named_never_a_crash_nor_a_peak(tmp_path: Path) -> None:
    """A copy with a stray quote (one endless field), one whose readings are inf and nan, one from the day before the run: unmeasured, named; no infinite or NaN peak."""
    rows = _csv(node_rows()).splitlines()
    rows[3] = '"' + rows[3]
    cases = {
        "quote": "\n".join(rows) + "\n" + "1," * 70_000 + "\n",
        "inf": _csv([{**r, "gpu0_used_mib": "inf", "gpu1_used_mib": "nan"} for r in node_rows()]),
        "yesterday": _csv([{**r, "wall_time": r["wall_time"] - 86_400} for r in node_rows()]),
    }
    for name, text in cases.items():
        root = bundle(tmp_path / name)
        _copies(root, {"n1": text})
        status, summary, _, _ = judged(root)
        assert status is Status.NO_DATA, (name, summary)
        [gpu_memory] = judge_gpu_memory(BundleReader(root), config_for(root))
        assert gpu_memory.status is Status.NO_DATA, (name, gpu_memory.summary)
        values = [float(v) for v in gpu_memory.measurements.values()]  # type: ignore[arg-type]
        assert all(math.isfinite(v) for v in values)


def test_every_phase_span_is_held_to_its_requests(tmp_path: Path) -> None:
    """Spans that overlap (a fake span stealing the sustained rows), or a ramp span dropped while its requests are kept (its peak made 'outside'): unmeasured. Rows between two phases still count for the peak."""
    root = bundle(tmp_path, ray_lines({"a": node_rows()}))
    spans = {s["phase"]: s for s in timeline()}
    ramp = spans["concurrency"]
    (root / "requests").mkdir(exist_ok=True)
    sent = [{**BARE, "started_at": ramp["start"] + 1.0}, {**BARE, "started_at": ramp["end"] - 1.0}]
    (root / CAPACITY_CONCURRENCY_REQUESTS).write_text("".join(json.dumps(r) + "\n" for r in sent))
    assert judged(root)[0] is Status.PASS
    sustained = spans["sustained"]
    stolen = {
        "phase": "concurrency",
        "start": sustained["start"] + 0.5,
        "end": sustained["end"] - 3,
    }
    (root / CAPACITY_PHASES).write_text(json.dumps([stolen, *timeline()]))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "spans overlap" in summary
    (root / CAPACITY_PHASES).write_text(
        json.dumps([s for s in timeline() if s["phase"] != "concurrency"])
    )
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "has no concurrency span" in summary


def test_a_gpu_two_sources_sampled_under_other_names_counts_once(tmp_path: Path) -> None:
    """TP=2 with only GPU0 sampled, by the Ray sampler (node gpu-node-b) and by a --gpu-curve file named otherwise: one GPU, unmeasured."""
    root = bundle(tmp_path, ray_lines({"gpu-node-b": node_rows(gpus=(0,))}))
    _with_copy(root, "b-nvml", _csv(node_rows(gpus=(0,))))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "1 GPU(s) of one source's sampled nodes" in summary


def test_a_total_the_launch_could_not_have_budgeted_is_not_a_gpus(tmp_path: Path) -> None:
    """The H200s' totals raised to 200,000 MiB (which would turn a low headroom into a pass): vLLM budgeted 0.5 of the real total and printed what it allocated; 0.5 of 200,000 is far more, so the total is not that GPU's."""
    rows = [{**r, "gpu0_total_mib": 200_000, "gpu1_total_mib": 200_000} for r in node_rows()]
    status, summary, _, _ = judged(bundle(tmp_path, ray_lines({"a": rows})))
    assert status is Status.NO_DATA
    assert "does not fit the launch" in summary


def test_the_record_is_held_to_what_the_config_asked_of_the_nodes(tmp_path: Path) -> None:
    """The config says what the run asked (capacity.gpu_curves, capacity.sample_gpus): a copy dropped with its record entry, the record's 'could not read' emptied, or Ray sampling asked and the record saying it was not read — each unmeasured, never judged on what is left; and the gpu_memory judge is expected wherever the config asked."""
    root = bundle(tmp_path)
    _copies(root, {"n1": _csv(node_rows(gpus=(0,))), "n2": _csv(node_rows(gpus=(1,)))})
    two = config_for(root)
    assert judge_memory(BundleReader(root), two)[0].status is Status.PASS
    _copies(root, {"n1": _csv(node_rows(gpus=(0,)))})  # n2's copy and entry gone
    (root / "memory/node-curve-n2.csv").unlink()
    [result] = judge_memory(BundleReader(root), two)
    assert result.status is Status.NO_DATA
    assert "names 2 --gpu-curve file(s)" in result.summary
    root = bundle(tmp_path / "ray", ray_lines({"a": node_rows()}))
    record = json.loads((root / NODE_CURVES).read_text())
    (root / NODE_CURVES).write_text(json.dumps({**record, "ray": False}))
    (root / RAY_GPU_CURVE).unlink()
    [result] = judge_memory(BundleReader(root), config_for(root, sample_gpus=True))
    assert result.status is Status.NO_DATA
    assert "capacity.sample_gpus" in result.summary
    (root / EFFECTIVE_CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (root / EFFECTIVE_CONFIG).write_text("capacity:\n  gpu_curves: [/nodes/n1.csv]\n")
    assert asked_node_curves(root)
    (root / EFFECTIVE_CONFIG).write_text("capacity:\n  concurrency: 4\n")
    assert not asked_node_curves(root)


def test_samples_deleted_from_a_nodes_rows_leave_it_unmeasured(tmp_path: Path) -> None:
    """Forty rows (8 s) taken out of the middle of a node's curve, where a peak could have been: the gap is named, unmeasured."""
    rows = node_rows()
    status, summary, _, _ = judged(bundle(tmp_path, ray_lines({"a": rows[:200] + rows[240:]})))
    assert status is Status.NO_DATA
    assert "its samples stop for" in summary


def test_a_copy_named_like_another_source_is_still_a_file(tmp_path: Path) -> None:
    """TP=2, GPU0 only, sampled by the Ray sampler and by a --gpu-curve copy named 'ray-b-nvml': the copy's source is where the record lists it, so one GPU, unmeasured."""
    root = bundle(tmp_path, ray_lines({"gpu-node-b": node_rows(gpus=(0,))}))
    _with_copy(root, "ray-b-nvml", _csv(node_rows(gpus=(0,))))
    status, summary, _, _ = judged(root)
    assert status is Status.NO_DATA
    assert "1 GPU(s) of one source's sampled nodes" in summary
