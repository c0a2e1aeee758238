"""`capacity.memory`: what the load needed of each engine GPU at its busiest moment (what NVML
saw it hold, less the KV cache the engine reserved and never used), and growth under
sustained load, judged from the bundle: a real two-H200 capture (vLLM 0.24, TP=2,
--gpu-memory-utilization 0.5) and curves shaped from it."""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from golive.bundle.layout import (
    CONTAINER,
    EFFECTIVE_CONFIG,
    GPU_DEVICES,
    MEMORY_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory import CHECK, growth_of, judge_memory
from golive.checks.capacity.memory_limits import needed_share
from golive.config import GoliveConfig
from golive.results import Status

CAPTURE = Path(__file__).parents[1] / "data" / "vllm-gpu-0.24-h200x2"
HOST = json.loads((CAPTURE / "host-h200x2.json").read_text())
H200_MIB = 143771
KV_POOL_MIB = 66.35 * 1024  # 'Available KV cache memory: 66.35 GiB' in the capture's log
LOCAL = "http://127.0.0.1:8000"


def inventory() -> list[dict[str, Any]]:
    """memory/gpus.json as the sampler writes it on that host (NVML's index, UUID, total)."""
    return [{k: g[k] for k in ("index", "name", "uuid", "memory_total_mib")} for g in HOST["gpus"]]


def bundle(
    tmp_path: Path,
    curve: str | None = None,
    host: bool = True,
    gpus: list[dict[str, Any]] | None = None,
) -> Path:
    """The capture as a capacity bundle: its curve (or `curve`), the sampler's GPUs, the host
    record and the startup log."""
    root = tmp_path / "bundle"
    for folder in ("memory", "environment", "config"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / MEMORY_CURVE).write_text(curve or (CAPTURE / "memory-capacity.csv").read_text())
    (root / GPU_DEVICES).write_text(json.dumps(inventory() if gpus is None else gpus))
    if host:
        shutil.copy(CAPTURE / "host-h200x2.json", root / "environment" / "host-vm.json")
    shutil.copy(CAPTURE / "startup.log", root / STARTUP_LOG)
    return root


def judged(
    root: Path, url: str = LOCAL, **capacity: float
) -> tuple[Status, str, Mapping[str, Any]]:
    config = GoliveConfig.model_validate({"target": {"url": url}, "capacity": capacity})
    [result] = judge_memory(BundleReader(root), config)
    assert result.id == CHECK
    assert not result.critical
    return result.status, result.summary, result.measurements


def edited(column: str, row: int, value: str) -> str:
    """The capture's curve with one sample changed."""
    lines = (CAPTURE / "memory-capacity.csv").read_text().splitlines()
    at = lines[0].split(",").index(column)
    cells = lines[row].split(",")
    cells[at] = value
    lines[row] = ",".join(cells)
    return "\n".join(lines) + "\n"


def shaped(gpu0: list[float], kv: list[float] | None = None, step_s: float = 5.0) -> str:
    """A curve of the capture's columns: a load row, then a sustained window of `gpu0` (GPU1
    flat at the capture's level) and `kv`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["t_s", "phase", "gpu0_used_mib", "gpu1_used_mib", "kv_cache_usage_perc"])
    writer.writerow([0.0, "concurrency", 74457.9, 74457.9, 0.2])
    for i, used in enumerate(gpu0):
        writer.writerow([10 + i * step_s, "sustained", used, 74461.9, kv[i] if kv else 0.3])
    return out.getvalue()


def test_the_real_capture_needed_little_of_what_it_reserved(tmp_path: Path) -> None:
    """The real two-H200 capture (0.5 reserved, the KV cache at most 0.36% used): each GPU needed a few percent of its memory at the busiest moment, a pass that names the launch's reservation."""
    # 74,462 MiB held of 143,771; the KV cache (66.35 GiB) at most 0.36% used under the load
    status, summary, m = judged(bundle(tmp_path))
    assert status is Status.PASS, summary
    expected = 1 - (74461.9375 - KV_POOL_MIB * (1 - 0.0035836606051239395)) / H200_MIB
    assert m["gpu0_headroom"] == pytest.approx(expected, abs=1e-4)
    assert m["gpu_memory_utilization"] == "0.5"
    assert m["gpu1_total_mib"] == H200_MIB


def test_a_load_that_fills_the_cache_leaves_no_headroom(tmp_path: Path) -> None:
    """The same reservation judged by use: a load that fills the cache needs what the GPU holds, and under a stated minimum that is a limit naming the GPU, the cache's use and the launch's setting."""
    # the same reservation, judged by use: a load that fills 97% of the cache needs ~50% of
    # each GPU, over a stated 55% minimum; the capture's own load needs ~5%
    full = edited("kv_cache_usage_perc", 360, "0.97")  # a sample of the sustained window
    status, summary, m = judged(bundle(tmp_path, full), min_memory_headroom=0.55)
    assert status is Status.WARN
    assert "GPU0 at its busiest needed 70.7 of its 140.4 GiB" in summary
    assert "KV cache 97.0% used under sustained load" in summary
    assert "--gpu-memory-utilization 0.5: at this load the cache filled" in summary
    assert m["kv_peak_usage"] == 0.97
    assert judged(bundle(tmp_path / "b"), min_memory_headroom=0.55)[0] is Status.PASS


def test_memory_growing_under_sustained_load_is_a_limit_naming_its_slope(
    tmp_path: Path,
) -> None:
    """A GPU whose memory climbs 40 MiB/s through the sustained window is a limit naming its slope and when the GPU is full."""
    noise = random.Random(7)
    leak = [74461.9 + 40.0 * 5 * i + noise.uniform(-50, 50) for i in range(120)]  # 40 MiB/s
    status, summary, m = judged(bundle(tmp_path, shaped(leak)))
    assert status is Status.WARN
    assert "GPU0 memory grew" in summary
    assert "MiB/s" in summary
    assert "it is full in" in summary
    assert m["gpu0_sustained_slope_per_s"] == pytest.approx(40.0, rel=0.05)


@pytest.mark.parametrize(
    "kv",
    [
        # requests come and go
        [random.Random(3).uniform(0.1, 0.6) for _ in range(120)],
        # the cache filling as sessions lengthen, then level: the window's warm-up
        [min(0.4, 0.4 * i / 12) for i in range(120)],
        [0.2 + 0.3 * min(1.0, i / 40) for i in range(120)],
    ],
    ids=["noisy", "warm-up", "fills-then-levels"],
)
def test_a_cache_that_settles_is_not_growth(tmp_path: Path, kv: list[float]) -> None:
    """KV usage that is noisy, or fills during the window's warm-up and then levels, is not growth (the fit skips the first third)."""
    flat = [74461.9 + random.Random(5).uniform(-200, 200) for _ in range(120)]
    status, summary, _ = judged(bundle(tmp_path, shaped(flat, kv)))
    assert status is Status.PASS, summary


def test_a_tiny_significant_drift_is_not_a_limit(tmp_path: Path) -> None:
    """A drift significant over many samples but far under the size that matters is not a limit."""
    # +0.5 MiB/s for 600 s: significant, 0.2% of an H200, under the 2% that matters
    tiny = [74461.9 + 0.5 * 5 * i for i in range(120)]
    assert judged(bundle(tmp_path, shaped(tiny)))[0] is Status.PASS


def test_kv_usage_climbing_under_fixed_load_is_a_limit(tmp_path: Path) -> None:
    """KV cache usage that keeps climbing under fixed load is a limit saying requests will queue or be preempted."""
    kv = [min(0.95, 0.2 + 0.006 * i) for i in range(120)]
    status, summary, _ = judged(bundle(tmp_path, shaped([74461.9] * 120, kv)))
    assert status is Status.WARN
    assert "KV cache usage grew" in summary
    assert "then requests queue or are preempted" in summary


def test_another_hosts_gpus_are_not_the_engines(tmp_path: Path) -> None:
    """golive's own GPUs judge nothing of a remote engine unless the serving container names them by UUID; a container naming other GPUs says they are not the engine's."""
    # golive on a client box against a remote target: its GPUs say nothing of the engine's
    status, summary, _ = judged(bundle(tmp_path, host=False), url="http://10.0.0.7:8000")
    assert status is Status.NO_DATA
    assert "golive ran on another host than the engine" in summary
    # the serving container names the engine's GPUs by UUID: those are judged, wherever
    root = bundle(tmp_path / "b", host=False)
    seen = [{"index": 0, "name": "NVIDIA H200", "uuid": HOST["gpus"][1]["uuid"]}]
    (root / CONTAINER).write_text(json.dumps({"kind": "container", "gpus": seen}))
    status, summary, m = judged(root, url="http://10.0.0.7:8000")
    assert status is Status.PASS, summary
    assert "gpu1_headroom" in m
    assert "gpu0_headroom" not in m
    (root / CONTAINER).write_text(json.dumps({"gpus": [{"index": 0, "name": "x", "uuid": "G"}]}))
    assert "not the serving container's" in judged(root, url="http://10.0.0.7:8000")[1]


def test_an_idle_local_gpu_is_not_the_engines(tmp_path: Path) -> None:
    """Beside a loopback target, a GPU that never held what the engine printed it allocated is not the engine's: no_data, not a 99% headroom."""
    curve = shaped([812.0] * 30).replace("74457.9", "812.0").replace("74461.9", "812.0")
    status, summary, _ = judged(bundle(tmp_path, curve))
    assert status is Status.NO_DATA
    assert "no GPU of this host held what the engine printed it allocated" in summary


@pytest.mark.parametrize(
    ("gpus", "reason"),
    [
        # one GPU left out of the inventory: its column is still in the curve
        (inventory()[1:], "has gpu0_used_mib, a GPU memory/gpus.json does not list"),
        # an inflated total without its UUID
        ([{**g, "uuid": "", "memory_total_mib": 575084} for g in inventory()], "is not a GPU"),
        # an inflated total the host record contradicts
        ([{**g, "memory_total_mib": 200000} for g in inventory()], "totals disagree"),
        ([{**g, "memory_total_mib": float("nan")} for g in inventory()], "not a GPU inventory"),
        ([{"index": "0"}], "not a GPU inventory"),
    ],
    ids=["left-out", "no-uuid", "inflated", "nan", "shape"],
)
def test_an_edited_inventory_is_no_data_never_a_pass(
    tmp_path: Path, gpus: list[dict[str, Any]], reason: str
) -> None:
    """memory/gpus.json edited (a GPU left out, a total inflated with or without its UUID, NaN, a wrong shape): no_data, never a better judgement."""
    status, summary, _ = judged(bundle(tmp_path, gpus=gpus))
    assert status is Status.NO_DATA
    assert reason in summary


def test_the_curve_keeps_each_gpus_total_beside_the_inventory(tmp_path: Path) -> None:
    """The sampler writes each GPU's total into the curve too: an inventory inflated where no host record says otherwise still disagrees with the curve."""
    curve = shaped([74461.9] * 30)
    lines = curve.splitlines()
    lines[0] += ",gpu0_total_mib,gpu1_total_mib"
    lines[1:] = [f"{line},{H200_MIB},{H200_MIB}" for line in lines[1:]]
    status, _, _ = judged(bundle(tmp_path, "\n".join(lines) + "\n", host=False))
    assert status is Status.PASS
    gpus = [{**g, "memory_total_mib": 300000} for g in inventory()]  # no host record to say
    status, summary, _ = judged(bundle(tmp_path / "b", "\n".join(lines) + "\n", False, gpus))
    assert status is Status.NO_DATA
    assert "totals disagree" in summary


@pytest.mark.parametrize(
    ("curve", "reason"),
    [
        ("t_s,phase,host_rss_mib\n0.0,sustained,900\n", "has no kv_cache_usage_perc"),
        (shaped([74461.9] * 3), "3 sample(s) in the sustained window"),
    ],
)
def test_unmeasured_is_no_data_never_a_pass(tmp_path: Path, curve: str, reason: str) -> None:
    """No GPU (the CPU target) or too few sustained samples: no_data saying what is missing."""
    if "host_rss" in curve:  # the CPU target: no GPU at all
        root = bundle(tmp_path, curve, gpus=[])
        assert "saw no GPU" in judged(root)[1]
        return
    status, summary, _ = judged(bundle(tmp_path, curve))
    assert status is Status.NO_DATA
    assert reason in summary


def test_without_the_kv_cache_size_reserved_and_needed_cannot_be_told_apart(
    tmp_path: Path,
) -> None:
    """Without the startup log's KV cache size, what was reserved cannot be told from what was needed: no_data."""
    root = bundle(tmp_path)
    (root / STARTUP_LOG).unlink()
    status, summary, _ = judged(root)
    assert status is Status.NO_DATA
    assert "no KV cache size" in summary


def test_a_saved_config_without_the_rule_is_judged_by_it(tmp_path: Path) -> None:
    """A bundle whose effective config names no capacity.min_memory_headroom (sealed before
    the rule, or the key removed by hand) is judged on memory all the same, with the
    default: the same result as with the key."""
    root = bundle(tmp_path)
    config = GoliveConfig().model_dump(mode="json")
    (root / EFFECTIVE_CONFIG).write_text(yaml.safe_dump(config))
    with_key = judge_memory(BundleReader(root), GoliveConfig())
    assert with_key
    del config["capacity"]["min_memory_headroom"]
    (root / EFFECTIVE_CONFIG).write_text(yaml.safe_dump(config))
    assert judge_memory(BundleReader(root), GoliveConfig()) == with_key


@pytest.mark.parametrize(
    ("peak", "usage", "share"),
    [
        (90.0, 1.0, 0.9),  # the cache full: all of what it held
        (90.0, 0.0, 0.1),  # the cache unused: the rest
        (90.0, 0.5, 0.5),
        (90.0, 1.7, 0.9),  # a gauge beyond 1 counts as full, never more
    ],
)
def test_needed_share(peak: float, usage: float, share: float) -> None:
    """What a GPU needed: what it held less the KV pool the engine never used (a gauge above 1 counts as full)."""
    assert needed_share(100.0, peak, 80.0, usage) == pytest.approx(share)


def test_growth_needs_enough_samples() -> None:
    """Growth is judged only over enough samples for a fit after the warm-up and three thirds."""
    assert growth_of([(float(t), float(t)) for t in range(8)], 10) is None
    grown = growth_of([(float(t), float(t)) for t in range(9)], 10)
    assert grown is not None
    assert grown.significant(0.02)


DEFAULT_UTIL = Path(__file__).parents[1] / "data" / "vllm-gpu-0.24-h200x1-util09"


def gpu_run(tmp_path: Path, curve: str | None = None) -> Path:
    """The real H200 run at vLLM's default --gpu-memory-utilization 0.9, as its bundle had it."""
    root = tmp_path / "gpurun"
    for rel, name in (
        (MEMORY_CURVE, "capacity.csv"),
        (GPU_DEVICES, "gpus.json"),
        (STARTUP_LOG, "startup.log"),
        (CONTAINER, "container.json"),
        ("environment/host-vm.json", "host-vm.json"),
        (EFFECTIVE_CONFIG, "effective.yaml"),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEFAULT_UTIL / name, root / rel)
    if curve is not None:
        (root / MEMORY_CURVE).write_text(curve)
    return root


def test_vllms_default_reservation_is_not_a_limit_on_a_real_h200(tmp_path: Path) -> None:
    """At vLLM's default 0.9 the H200 held 90.6% of its memory (9.4% spare, under the 10%
    minimum): a reservation, not a need. What the load needed leaves 96% spare, from the
    figures the run sealed (its check came from an earlier cut of this rule, which took the
    KV peak over every phase: 0.16% then, 0.11% in the sustained window)."""
    status, summary, m = judged(gpu_run(tmp_path))
    sealed = json.loads((DEFAULT_UTIL / "capacity-memory-check.json").read_text())
    assert status is Status.PASS, summary
    for key in ("gpu0_total_mib", "gpu0_peak_mib", "kv_pool_per_gpu_mib", "allocated_per_gpu_mib"):
        assert m[key] == sealed["measurements"][key]
    assert m["gpu0_peak_mib"] / m["gpu0_total_mib"] > 0.9  # reserved beyond the minimum
    assert m["gpu0_headroom"] == pytest.approx(0.9606, abs=1e-4)


def test_a_load_filling_the_default_reservation_is_a_limit_on_a_real_h200(
    tmp_path: Path,
) -> None:
    """The same run with one gauge sample at a full cache: at 0.9 what the load needs is
    what the GPU holds, 9.4% spare, under the 10% minimum."""
    lines = (DEFAULT_UTIL / "capacity.csv").read_text().splitlines()
    column = lines[0].split(",").index("kv_cache_usage_perc")
    row = next(
        i
        for i, line in enumerate(lines[1:], 1)
        if line.split(",")[1] == "sustained" and line.split(",")[column] not in ("", "0.0")
    )
    cells = lines[row].split(",")
    cells[column] = "1.0"
    lines[row] = ",".join(cells)
    status, summary, m = judged(gpu_run(tmp_path, "\n".join(lines) + "\n"))
    assert status is Status.WARN
    assert "(9.4% spare, under the 10% capacity.min_memory_headroom)" in summary
    assert "--gpu-memory-utilization 0.9: at this load the cache filled" in summary
    assert m["kv_peak_usage"] == 1.0


def test_swapped_uuids_in_the_inventory_are_caught_by_the_host_record(tmp_path: Path) -> None:
    """The curve's columns are NVML indices: an inventory whose UUIDs trade places (to move
    the judgement onto another GPU) disagrees with the host record's index."""
    gpus = inventory()
    gpus[0]["uuid"], gpus[1]["uuid"] = gpus[1]["uuid"], gpus[0]["uuid"]
    status, summary, _ = judged(bundle(tmp_path, gpus=gpus))
    assert status is Status.NO_DATA
    assert "the host record says that GPU is index 1" in summary


def test_a_gpu_that_never_held_the_engines_allocation_is_not_judged(tmp_path: Path) -> None:
    """The serving container naming an idle GPU (edited, or a container that sees every GPU of
    a shared host) does not make that GPU's 99% spare the engine's headroom."""
    rows = shaped([74461.9] * 30).splitlines()
    rows = [rows[0]] + [",".join([*r.split(",")[:3], "812.0", r.split(",")[4]]) for r in rows[1:]]
    root = bundle(tmp_path, "\n".join(rows) + "\n")
    idle = [{"index": 0, "name": "NVIDIA H200", "uuid": HOST["gpus"][1]["uuid"]}]
    (root / CONTAINER).write_text(json.dumps({"kind": "container", "gpus": idle}))
    status, summary, _ = judged(root)
    assert status is Status.NO_DATA
    assert "GPU1 held 812 MiB at most, but the engine printed it allocated" in summary


def test_a_kv_pool_larger_than_the_gpu_holds_is_no_data(tmp_path: Path) -> None:
    """A startup log edited to a pool beyond what the GPU held (so that less of it seems
    needed) contradicts the curve: no_data, never more headroom."""
    root = bundle(tmp_path, edited("kv_cache_usage_perc", 360, "0.99"))
    log = (root / STARTUP_LOG).read_text()
    (root / STARTUP_LOG).write_text(
        log.replace("Available KV cache memory: 66.35 GiB", "Available KV cache memory: 4000.0 GiB")
    )
    status, summary, _ = judged(root)
    assert status is Status.NO_DATA
    assert "allocated (4000.9 GiB" in summary


def test_a_full_cache_on_a_ramp_step_past_the_knee_is_not_a_memory_limit(tmp_path: Path) -> None:
    """A ramp step beyond the ceiling fills the cache by design (queueing, judged by
    capacity.concurrency): only the sustained load's use counts."""
    ramp = edited("kv_cache_usage_perc", 100, "1.0")  # a concurrency-phase sample
    assert ramp.splitlines()[100].split(",")[1] == "concurrency"
    assert judged(bundle(tmp_path, ramp), min_memory_headroom=0.55)[0] is Status.PASS
