"""`capacity.memory`: GPU memory judged, not only recorded (checklist: stress-test memory
headroom; issue 29 §3).

vLLM reserves its KV cache up front (`--gpu-memory-utilization` of each GPU, 0.9 by default,
0.95-0.97 in the Kimi K3 recipe), so what NVML shows a GPU holding says what the launch
reserved, not what the load needed. The check splits the two:

- **Headroom at the busiest moment**: each engine GPU's NVML peak under the phases, less the
  part of the KV pool (`Available KV cache memory`, from the startup log) the engine's own
  `kv_cache_usage_perc` never used — weights, CUDA graphs, activations, the CUDA context and
  the KV cache the load filled — against the GPU's memory. Less than
  `capacity.min_memory_headroom` spare is a limit: the load filled the cache (more queues or is
  preempted) or the rest outgrew the GPU.
- **Growth under sustained load**: each engine GPU's memory and the KV cache usage over the
  sustained window after its warm-up (its first third), judged with the latency drift's rule:
  significant (the fitted slope's 95% interval above zero) and large — the fit's rise and the
  last third's median against the middle third's both above `capacity.max_memory_growth` of
  the GPU's memory or of the cache. A growth is a limit naming its slope.

The GPUs judged are the engine's: those the serving container's torch saw (by UUID), else,
with golive beside a loopback target, those holding at least what the engine printed it
allocated. Anything unmeasured is `no_data`, never a pass. Every bundle with capacity
windows is judged on it, whatever keys its saved config names.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from golive.bundle.layout import (
    CONTAINER,
    GPU_DEVICES,
    MEMORY_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import cap_result
from golive.checks.capacity.memory_curve import SavedCurve, read_curve
from golive.checks.capacity.windows import Trend, trend_of_gauge
from golive.checks.env.judge import serving_launch
from golive.config import GoliveConfig
from golive.results import CheckResult, Status

CHECK = "capacity.memory"
_NO_GPU = (
    f"GPU memory unmeasured: capacity's NVML sampler saw no GPU where golive ran ({GPU_DEVICES}); "
    "run golive on the GPU host"
)
MIN_GROWTH_POINTS = 9  # a fit over the last two thirds, and thirds of at least three samples
MAX_GPU_MIB = 2**20  # 1 TiB: a total above it is not a GPU's
_GIB = 1024.0


@dataclass(frozen=True, slots=True)
class Growth:
    """How a series grew over the sustained window after its warm-up, as a share of what
    there is (the GPU's memory, the whole cache)."""

    trend: Trend
    rise_share: float  # fitted rise over the last two thirds / capacity
    thirds_share: float  # last third's median - middle third's, / capacity
    span_s: float

    def significant(self, max_share: float) -> bool:
        return self.trend.low > 0 and self.rise_share > max_share and self.thirds_share > max_share


def growth_of(points: Sequence[tuple[float, float]], capacity: float) -> Growth | None:
    """The fit over the last two thirds of `points` (t, value) and its thirds, against
    `capacity`; None with fewer than MIN_GROWTH_POINTS samples or no spread in time."""
    ordered = sorted(points)
    if len(ordered) < MIN_GROWTH_POINTS or capacity <= 0:
        return None
    third = len(ordered) // 3
    settled = ordered[third:]  # the window's first third is its warm-up (the cache filling)
    fitted = trend_of_gauge(settled)
    if fitted is None:
        return None
    middle = sorted(y for _, y in ordered[third : 2 * third])
    last = sorted(y for _, y in ordered[2 * third :])
    span = settled[-1][0] - settled[0][0]
    return Growth(
        fitted,
        fitted.slope * span / capacity,
        (last[len(last) // 2] - middle[len(middle) // 2]) / capacity,
        span,
    )


def needed_share(
    total_mib: float, peak_mib: float, kv_pool_mib: float, kv_peak_usage: float
) -> float:
    """What one GPU needed at the busiest moment, as a share of it: what it held less the KV
    pool the engine never used."""
    return (peak_mib - kv_pool_mib * (1 - min(max(kv_peak_usage, 0.0), 1.0))) / total_mib


def judge_memory(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """`capacity.memory` from the bundle."""
    limits = config.capacity
    curve_text = evidence.text(MEMORY_CURVE)
    curve = read_curve(curve_text or "")
    facts = serving_launch(evidence)
    own = evidence.json(GPU_DEVICES)
    measurements: dict[str, Any] = {
        "min_memory_headroom": limits.min_memory_headroom,
        "max_memory_growth": limits.max_memory_growth,
    }
    files = [
        f
        for f, read in ((MEMORY_CURVE, curve_text), (GPU_DEVICES, own), (STARTUP_LOG, facts))
        if read is not None
    ]
    if own in (None, []):  # the CPU target, or golive off the GPU host
        return [_unmeasured(_NO_GPU, measurements, files)]
    if facts is None or facts.available_kv_gib is None:
        return [
            _unmeasured(
                f"no KV cache size in {STARTUP_LOG} ('Available KV cache memory', pass --log): "
                "what the GPUs reserved cannot be told from what the load needed",
                measurements,
                files,
            )
        ]
    kv_pool = facts.available_kv_gib * _GIB
    allocated = (facts.model_load_gib or 0.0) * _GIB + (facts.cuda_graph_gib or 0.0) * _GIB
    allocated += kv_pool
    utilization = facts.arg("gpu_memory_utilization")
    measurements |= {
        "kv_pool_per_gpu_mib": round(kv_pool),
        "allocated_per_gpu_mib": round(allocated),
        "gpu_memory_utilization": None if utilization is None else str(utilization),
    }
    gpus, why = engine_gpus(evidence, own, curve, allocated, config.target.url)
    if why:
        return [_unmeasured(why, measurements, files)]
    # the KV cache the accepted load used: the sustained window's (a ramp step past the knee
    # fills it by design; that is queueing, judged by capacity.concurrency)
    kv_peak = curve.peak("kv_cache_usage_perc", "sustained")
    if kv_peak is None:
        return [
            _unmeasured(
                f"the engine's KV cache usage was never read under sustained load ({MEMORY_CURVE} "
                "has no kv_cache_usage_perc in the sustained window): the load's share of the "
                "reserved cache is unknown",
                measurements,
                files,
            )
        ]
    measurements["kv_peak_usage"] = round(kv_peak, 4)
    low: list[str] = []
    headrooms: list[float] = []
    for index, total in gpus:
        peak = curve.peak(f"gpu{index}_used_mib") or 0.0
        if not allocated <= peak <= total:
            return [
                _unmeasured(
                    f"GPU{index} held {peak:.0f} MiB at most, but the engine printed it "
                    f"allocated {allocated:.0f} MiB of its {total:.0f}: the curve, the "
                    "inventory and the startup log are not one GPU's",
                    measurements,
                    files,
                )
            ]
        spare = 1 - needed_share(total, peak, kv_pool, kv_peak)
        headrooms.append(spare)
        measurements |= {
            f"gpu{index}_total_mib": round(total),
            f"gpu{index}_peak_mib": round(peak, 1),
            f"gpu{index}_headroom": round(spare, 4),
        }
        if spare < limits.min_memory_headroom:
            low.append(
                f"GPU{index} at its busiest needed {total * (1 - spare) / _GIB:.1f} of its "
                f"{total / _GIB:.1f} GiB ({spare:.1%} spare, under the "
                f"{limits.min_memory_headroom:.0%} capacity.min_memory_headroom) with the KV "
                f"cache {kv_peak:.1%} used under sustained load"
            )
    measurements["min_headroom"] = round(min(headrooms), 4)
    grown, unmeasured = _growth(
        curve, gpus, limits.max_memory_growth, limits.max_kv_growth, measurements
    )
    if low:
        pool = facts.arg("kv_cache_memory_bytes")
        asked = (
            f"--kv-cache-memory-bytes {pool}"
            if pool
            else f"--gpu-memory-utilization {utilization}"
            if utilization
            else "vLLM's default 0.9"
        )
        low.append(
            f"the launch reserves {asked}: at this load the cache "
            + ("filled (more load queues or is preempted)" if kv_peak >= 0.9 else "did not fill")
        )
    if low or grown:
        summary = "memory limit: " + "; ".join([*low, *grown])
        return [cap_result(CHECK, Status.WARN, summary, measurements, files, critical=False)]
    if unmeasured:
        return [_unmeasured("; ".join(unmeasured), measurements, files)]
    summary = (
        f"least GPU headroom {min(headrooms):.1%} at the busiest moment (KV cache "
        f"{kv_peak:.1%} used under sustained load; at least {limits.min_memory_headroom:.0%}); "
        "GPU memory and KV "
        "cache usage flat under sustained load"
    )
    return [cap_result(CHECK, Status.PASS, summary, measurements, files, critical=False)]


def engine_gpus(
    evidence: BundleReader,
    own: Any,
    curve: SavedCurve,
    allocated_mib: float,
    target_url: str | None,
) -> tuple[list[tuple[int, float]], str]:
    """(NVML index, memory total) of each GPU of this host that is the engine's, or why none
    can be judged: the serving container's GPUs by UUID, else — golive beside a loopback
    target — those holding at least what the engine allocated. `own`: `memory/gpus.json` as
    read, not empty."""
    inventory, problem = _inventory(evidence, own)
    if problem:
        return [], problem
    seen = _container_uuids(evidence)
    if seen:
        mine = [g for g in inventory if g[2] in seen]
        if not mine:
            return [], (
                f"the GPUs golive's host has ({GPU_DEVICES}) are not the serving container's "
                f"({CONTAINER}): golive ran on another host than the engine"
            )
    elif _loopback(target_url):
        mine = [g for g in inventory if (curve.peak(f"gpu{g[0]}_used_mib") or 0) >= allocated_mib]
        if not mine:
            return [], (
                f"no GPU of this host held what the engine printed it allocated "
                f"({allocated_mib / _GIB:.1f} GiB: weights, CUDA graphs, KV cache) in "
                f"{MEMORY_CURVE}: not the engine's GPUs"
            )
    else:
        return [], (
            f"golive ran on another host than the engine (target {target_url}) and no "
            f"{CONTAINER} names the engine's GPUs: the NVML curve is not the engine's"
        )
    listed = {i for i, _, _ in inventory}
    unlisted = sorted(
        c for c in curve.columns if c.endswith("_used_mib") and _index(c) not in listed
    )
    if unlisted:
        return [], f"{MEMORY_CURVE} has {', '.join(unlisted)}, a GPU {GPU_DEVICES} does not list"
    short = [f"GPU{i}" for i, _, _ in mine if curve.peak(f"gpu{i}_used_mib") is None]
    if short:
        return [], f"{', '.join(short)} never read in {MEMORY_CURVE}"
    for index, total, _ in mine:
        sampled = {v for _, v in curve.columns.get(f"gpu{index}_total_mib", ())}
        if sampled and sampled != {float(int(total))}:
            return [], (
                f"GPU memory totals disagree: {GPU_DEVICES} says {total:.0f} MiB for GPU "
                f"{index}, {MEMORY_CURVE} {', '.join(f'{v:.0f}' for v in sorted(sampled))} MiB"
            )
    return [(i, total) for i, total, _ in mine], ""


def _inventory(evidence: BundleReader, own: Any) -> tuple[list[tuple[int, float, str | None]], str]:
    """The sampler's GPUs (index, memory total, UUID); each must be a plausible total and,
    where the env section recorded hosts, a GPU of one of them with the same index and total."""
    hosts: dict[str, tuple[Any, Any]] = {}  # UUID: (NVML index, total) on its host
    for path in sorted((evidence.root / "environment").glob("host-*.json")):
        record = evidence.json(f"environment/{path.name}")
        for gpu in (record.get("gpus") if isinstance(record, Mapping) else None) or ():
            if isinstance(gpu, Mapping) and isinstance(gpu.get("uuid"), str):
                hosts[gpu["uuid"]] = (gpu.get("index"), gpu.get("memory_total_mib"))
    out: list[tuple[int, float, str | None]] = []
    for gpu in own if isinstance(own, list) else [own]:
        index = gpu.get("index") if isinstance(gpu, Mapping) else None
        total = gpu.get("memory_total_mib") if isinstance(gpu, Mapping) else None
        found = gpu.get("uuid") if isinstance(gpu, Mapping) else None
        uuid = found if isinstance(found, str) else None
        if not isinstance(index, int) or isinstance(index, bool) or not _plausible(total):
            return [], f"{GPU_DEVICES}: not a GPU inventory ({gpu!r:.120})"
        if hosts and (uuid is None or uuid not in hosts or not _plausible(hosts[uuid][1])):
            return [], (
                f"{GPU_DEVICES}: GPU {index} ({uuid}) is not a GPU of the env section's host "
                "records: this host's GPUs are not the serving node's"
            )
        if hosts and uuid is not None and hosts[uuid][0] != index:
            return [], (
                f"{GPU_DEVICES} says GPU {index} is {uuid}, the host record says that GPU is "
                f"index {hosts[uuid][0]}: the curve's columns cannot be told apart"
            )
        if hosts and uuid is not None and abs(float(hosts[uuid][1]) - float(total)) > 1:
            return [], (
                f"GPU memory totals disagree: {GPU_DEVICES} says {total} MiB for GPU {index}, "
                f"the host record {hosts[uuid][1]} MiB"
            )
        out.append((index, float(total), uuid))
    return out, ""


def _index(column: str) -> int | None:
    digits = column.removeprefix("gpu").split("_", 1)[0]
    return int(digits) if digits.isdigit() else None


def _plausible(total: object) -> TypeGuard[int | float]:
    return (
        isinstance(total, int | float)
        and not isinstance(total, bool)
        and math.isfinite(total)
        and 0 < total <= MAX_GPU_MIB
    )


def _container_uuids(evidence: BundleReader) -> set[str]:
    container = evidence.json(CONTAINER)
    gpus = container.get("gpus") if isinstance(container, Mapping) else None
    return {
        g["uuid"] for g in gpus or () if isinstance(g, Mapping) and isinstance(g.get("uuid"), str)
    }


def _loopback(url: str | None) -> bool:
    host = urlsplit(url or "").hostname
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _growth(
    curve: SavedCurve,
    gpus: Sequence[tuple[int, float]],
    max_share: float,
    max_kv_share: float,
    out: dict[str, Any],
) -> tuple[list[str], list[str]]:
    """Limits for what grew under sustained load after its warm-up, and what went unjudged."""
    series = [(f"GPU{i} memory", f"gpu{i}_used_mib", total, max_share) for i, total in gpus]
    series.append(("KV cache usage", "kv_cache_usage_perc", 1.0, max_kv_share))
    grown: list[str] = []
    unmeasured: list[str] = []
    for name, column, capacity, limit in series:
        points = curve.series(column, "sustained")
        growth = growth_of(points, capacity)
        key = column.removesuffix("_used_mib").removesuffix("_usage_perc")
        if growth is None:
            unmeasured.append(
                f"{name} under sustained load: {len(points)} sample(s) in the sustained window "
                f"of {MEMORY_CURVE}, {MIN_GROWTH_POINTS} needed"
            )
            continue
        out[f"{key}_sustained_slope_per_s"] = round(growth.trend.slope, 6)
        out[f"{key}_sustained_growth_share"] = round(growth.rise_share, 4)
        if not growth.significant(limit):
            continue
        memory = column != "kv_cache_usage_perc"
        scale, unit = (1.0, "MiB/s") if memory else (100.0, "points/s")
        fitted = growth.trend
        left = capacity - max(v for _, v in points)
        hours = left / fitted.slope / 3600 if left > 0 else 0.0
        grown.append(
            f"{name} grew {growth.rise_share:.1%} of {'its memory' if memory else 'the cache'} "
            f"over the sustained window after its warm-up ({growth.span_s:.0f} s; slope "
            f"{fitted.slope * scale:.3g} {unit}, 95% CI {fitted.low * scale:.3g}.."
            f"{fitted.high * scale:.3g}; last third {growth.thirds_share:+.1%} on the middle "
            f"third): at this slope {'it is full' if memory else 'the cache is full'} in "
            f"{hours:.1f} h" + ("" if memory else " (then requests queue or are preempted)")
        )
    return grown, unmeasured


def _unmeasured(reason: str, measurements: Mapping[str, Any], files: Sequence[str]) -> CheckResult:
    return cap_result(CHECK, Status.NO_DATA, reason, measurements, files, critical=False)
