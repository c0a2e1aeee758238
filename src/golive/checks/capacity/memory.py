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
- **What the loaded model leaves** (`memory_limits`): each GPU's budget less the KV pool —
  weights, the start-up activation peak, CUDA graphs — or, where larger, golive's first NVML
  reading less the pool, against its memory.
  Less than `capacity.min_memory_headroom` spare is a limit no concurrency lifts.
- **Where the sustained load lacked headroom**, the ramp's windows under its level are judged
  the same way from their own curve rows: the highest level that kept the minimum (with
  every level under it, each at its worst window) is named as a candidate ceiling to hold
  under sustained load — not the verdict's limit: a ramp window is seconds long.
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import (
    CAPACITY_KNEE_REPEATS,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    DCGM_USED,
    GPU_DEVICES,
    MEMORY_CURVE,
    NODE_CURVES,
    RAY_GPU_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory_curve import SavedCurve, read_curve
from golive.checks.capacity.memory_gpus import engine_gpus
from golive.checks.capacity.memory_limits import (
    concurrency_cap,
    first_reading,
    launch_utilization,
    load_needed_mib,
    needed_share,
    step_spares,
)
from golive.checks.capacity.memory_nodes import JudgedGpu, node_gpus
from golive.checks.capacity.recorded import curve_differences
from golive.checks.capacity.windows import Trend, trend_of_gauge
from golive.checks.env.judge import serving_launch
from golive.config import GoliveConfig
from golive.evidence.startup_log import StartupFacts
from golive.results import CAPACITY_RESULT, CheckResult, Status, measured_number

CHECK = "capacity.memory"
HEADROOM_FLOOR = "min_memory_headroom"  # its measurement: the spare share it held GPUs to
_NO_GPU = (
    f"GPU memory unmeasured: capacity's NVML sampler saw no GPU where golive ran ({GPU_DEVICES}); "
    "run golive on the GPU host"
)
# the record of the node curves a run read, the nodes' own samplers, the DCGM exporter
NODE_EVIDENCE = (NODE_CURVES, RAY_GPU_CURVE, DCGM_USED)
MIN_GROWTH_POINTS = 9  # a fit over the last two thirds, and thirds of at least three samples
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


def judge_memory(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """`capacity.memory` from the bundle."""
    limits = config.capacity
    curve_text = evidence.text(MEMORY_CURVE)
    curve = read_curve(curve_text or "")
    facts = serving_launch(evidence)
    own = evidence.json(GPU_DEVICES)
    measurements: dict[str, Any] = {
        HEADROOM_FLOOR: limits.min_memory_headroom,
        "max_memory_growth": limits.max_memory_growth,
    }
    files = [
        f
        for f, read in ((MEMORY_CURVE, curve_text), (GPU_DEVICES, own), (STARTUP_LOG, facts))
        if read is not None
    ]
    # the CPU target, or golive off the GPU host with no node sampled
    if own in (None, []) and not any((evidence.root / p).exists() for p in NODE_EVIDENCE):
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
    gpus, why, curve = _judged_gpus(evidence, own, curve, allocated, facts, config, files)
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
    loaded: list[str] = []  # GPUs the loaded model leaves too little of, KV cache aside
    headrooms: list[float] = []
    budget = launch_utilization(facts)
    for gpu in gpus:
        total, name, key = gpu.total_mib, gpu.label, gpu.key
        peak = curve.peak(gpu.column) or 0.0
        if not allocated <= peak <= total:
            return [
                _unmeasured(
                    f"{name} held {peak:.0f} MiB at most, but the engine printed it "
                    f"allocated {allocated:.0f} MiB of its {total:.0f}: the curve, the "
                    "inventory and the startup log are not one GPU's",
                    measurements,
                    files,
                )
            ]
        spare = 1 - needed_share(total, peak, kv_pool, kv_peak)
        headrooms.append(spare)
        first = first_reading(curve, gpu.column)
        at_load = load_needed_mib(total, kv_pool, budget, first)
        load_spare = None if at_load is None else 1 - at_load / total
        measurements |= {
            f"{key}_total_mib": round(total),
            f"{key}_peak_mib": round(peak, 1),
            f"{key}_headroom": round(spare, 4),
            f"{key}_load_headroom": None if load_spare is None else round(load_spare, 4),
        }
        if (
            at_load is not None
            and load_spare is not None
            and load_spare < limits.min_memory_headroom
        ):
            tokens = f" ({facts.kv_cache_tokens:,} tokens)" if facts.kv_cache_tokens else ""
            loaded.append(
                f"{name} holds {at_load / _GIB:.1f} of its {total / _GIB:.1f} GiB for the "
                f"loaded model outside its KV cache (weights, the start-up activation peak, "
                f"CUDA graphs, what the process held beside them at golive's first reading: "
                f"{load_spare:.1%} spare, under the {limits.min_memory_headroom:.0%} "
                f"capacity.min_memory_headroom), leaving the KV cache {kv_pool / _GIB:.1f} GiB"
                f"{tokens}: no concurrency makes room; more GPUs per replica (tensor or "
                "pipeline parallel), a smaller quantization or a shorter --max-model-len do"
            )
        if spare < limits.min_memory_headroom:
            low.append(
                f"{name} at its busiest needed {total * (1 - spare) / _GIB:.1f} of its "
                f"{total / _GIB:.1f} GiB ({spare:.1%} spare, under the "
                f"{limits.min_memory_headroom:.0%} capacity.min_memory_headroom) with the KV "
                f"cache {kv_peak:.1%} used under sustained load"
            )
    measurements["min_headroom"] = round(min(headrooms), 4)
    grown, unmeasured = _growth(
        curve, gpus, limits.max_memory_growth, limits.max_kv_growth, measurements
    )
    if low and not loaded:
        low.append(
            _step_cap(
                evidence, curve_text or "", gpus, kv_pool, limits.min_memory_headroom, measurements
            )
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
    if loaded or low or grown:
        summary = "memory limit: " + "; ".join([*loaded, *low, *grown])
        return [
            CAPACITY_RESULT(
                CHECK, Status.WARN, summary, measurements, critical=False, evidence=files
            )
        ]
    if unmeasured:
        return [_unmeasured("; ".join(unmeasured), measurements, files)]
    summary = (
        f"least GPU headroom {min(headrooms):.1%} at the busiest moment (KV cache "
        f"{kv_peak:.1%} used under sustained load; at least {limits.min_memory_headroom:.0%}); "
        "GPU memory and KV "
        "cache usage flat under sustained load"
    )
    return [
        CAPACITY_RESULT(CHECK, Status.PASS, summary, measurements, critical=False, evidence=files)
    ]


def _growth(
    curve: SavedCurve,
    gpus: Sequence[JudgedGpu],
    max_share: float,
    max_kv_share: float,
    out: dict[str, Any],
) -> tuple[list[str], list[str]]:
    """Limits for what grew under sustained load after its warm-up, and what went unjudged."""
    series = [(f"{g.label} memory", g.column, g.total_mib, max_share) for g in gpus]
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


def _step_cap(
    evidence: BundleReader,
    curve_text: str,
    gpus: Sequence[JudgedGpu],
    kv_pool: float,
    min_headroom: float,
    out: dict[str, Any],
) -> str:
    """Where the sustained load lacked headroom: the highest ramp level under its level whose
    windows (step and knee repeats) kept it, as a candidate (`memory_candidate_concurrency`),
    or why there is none. A candidate, not the verdict's limit: a ramp window is seconds
    long, and the same level held longer fills more of the cache (on the real memory-tight
    H200 run: c16's step 73.7% of the cache, its sustained window 97%)."""
    own = [(g.index, g.total_mib) for g in gpus if g.index is not None]
    if len(own) < len(gpus):
        return (
            "the ramp's windows are matched to golive's own NVML curve only: with the nodes' "
            "curves no lower level is shown"
        )
    sustained = evidence.json(CAPACITY_SUSTAINED)
    level = sustained.get("concurrency") if isinstance(sustained, Mapping) else None
    if type(level) is not int:
        return f"no sustained window level in {CAPACITY_SUSTAINED}: no lower level is shown"
    rows = [*evidence.jsonl(CAPACITY_STEPS), *evidence.jsonl(CAPACITY_KNEE_REPEATS)]
    if curve_differences(rows, curve_text, CAPACITY_STEPS):
        return (
            f"the ramp's windows ({CAPACITY_STEPS}) do not match their curve rows: no lower "
            "level is shown"
        )
    spares = step_spares(rows, curve_text, own, kv_pool)
    for step in spares:
        if step.concurrency < level:
            out[f"c{step.concurrency}_gpu_headroom"] = (
                None if step.spare is None else round(step.spare, 4)
            )
    cap = concurrency_cap(spares, min_headroom, level)
    if cap is None:
        return (
            f"no ramp level under the sustained c{level} was measured keeping "
            f"{min_headroom:.0%} spare ({CAPACITY_STEPS}, {MEMORY_CURVE}): lowering "
            "concurrency is not shown to make room"
        )
    out["memory_candidate_concurrency"] = cap
    return (
        f"the ramp's windows up to c{cap} kept at least {min_headroom:.0%} spare, each for "
        f"seconds: a candidate ceiling of {cap}, not shown under sustained load (run again "
        f"with --concurrency {cap} to hold it for the sustained window)"
    )


def _judged_gpus(
    evidence: BundleReader,
    own: Any,
    curve: SavedCurve,
    allocated: float,
    facts: StartupFacts,
    config: GoliveConfig,
    files: list[str],
) -> tuple[list[JudgedGpu], str, SavedCurve]:
    """The engine's GPUs (those of golive's own host where it has any, else — golive off
    the GPU hosts, its curve without a GPU column — the nodes' curves), why none can be
    judged, and the curve they are judged on. The node files read are added to `files`."""
    if own not in (None, []):  # golive's own GPUs are judged on their own, never swapped
        local, why = engine_gpus(evidence, own, curve, allocated, config.target.url)
        if why:
            return [], why, curve
        return [JudgedGpu(f"GPU{i}", f"gpu{i}_used_mib", t, i) for i, t in local], "", curve
    nodes = node_gpus(evidence, config, facts, allocated)
    if nodes is None:
        return [], _NO_GPU, curve
    if own is None or any(c.startswith("gpu") and c.endswith("_used_mib") for c in curve.columns):
        # golive's own inventory gone, or its curve read GPUs the inventory does not list:
        # never judged on the nodes' curves instead
        return [], f"{_NO_GPU}; {GPU_DEVICES} does not say golive's host had none", curve
    files += [f for f in nodes.files if f not in files]
    if nodes.problem:
        return [], nodes.problem, curve
    # the engine's gauges from golive's curve beside the node GPUs' columns; each column
    # keeps its own clock (golive's from its start, the nodes' wall clock)
    joined = SavedCurve(
        {**curve.columns, **nodes.curve.columns}, {**curve.by_phase, **nodes.curve.by_phase}
    )
    return nodes.gpus, "", joined


def _unmeasured(reason: str, measurements: Mapping[str, Any], files: Sequence[str]) -> CheckResult:
    return CAPACITY_RESULT(
        CHECK, Status.NO_DATA, reason, measurements, critical=False, evidence=files
    )


def headroom_floor(measurements: Mapping[str, object]) -> float | None:
    """The spare GPU memory share capacity.memory held each GPU to (None: not stated)."""
    return measured_number(measurements.get(HEADROOM_FLOOR))
