"""The pressure phases' curves: the engine's gauges sampled beside the memory (2 Hz), the
model-load evidence (the startup log, `memory/load.csv`) and node-side GPU curves merged by
phase."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from golive.bundle.layout import LOAD_CURVE, STARTUP_LOG
from golive.checks.capacity.collect import CapacityInputs, Run, cap_result
from golive.checks.context import CheckContext, scrape
from golive.evidence.gpu_curve import PhaseSpan, merge_gpu_curve
from golive.evidence.sampling import Probe
from golive.results import CheckResult, Status

_GAUGES = ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", "num_preemptions")


def engine_probe(ctx: CheckContext) -> Probe:
    last = {"t": 0.0}

    async def probe() -> Mapping[str, float | None]:
        if time.monotonic() - last["t"] < 0.5:  # the engine's gauges at 2 Hz, memory at 5 Hz
            return {}
        last["t"] = time.monotonic()
        scraped = await scrape(ctx, None, only=_GAUGES, label="capacity-gauges")
        snap = scraped.snapshot
        if snap is None:  # every column named even so: the curve's header is its first row's
            return dict.fromkeys(_GAUGES)
        return {
            "kv_cache_usage_perc": snap.value("kv_cache_usage_perc", "max"),
            "num_requests_running": snap.value("num_requests_running"),
            "num_requests_waiting": snap.value("num_requests_waiting"),
            "num_preemptions": snap.value("num_preemptions"),
        }

    return probe


def save_load_evidence(run: Run) -> None:
    """Phase 1's evidence: the startup log (saved here where no section before saved it) and
    the host memory curve while golive's own launch loaded the model (`memory/load.csv`),
    judged by `capacity.model_load.judge_model_load`."""
    startup = run.inputs.startup
    if startup is not None and startup.text and not run.ctx.bundle.path(STARTUP_LOG).exists():
        run.ctx.bundle.write_text(STARTUP_LOG, startup.text)
    curve = run.inputs.load_curve
    if curve:
        run.ctx.bundle.write_text(
            LOAD_CURVE, "t_s,host_rss_mib\n" + "".join(f"{t},{m}\n" for t, m in curve)
        )


def merge_curves(
    ctx: CheckContext, inputs: CapacityInputs, timeline: list[PhaseSpan]
) -> CheckResult:
    """Node-side GPU curves merged by wall clock: peak memory per phase and GPU."""
    measurements: dict[str, Any] = {}
    evidence = []
    for path in inputs.gpu_curves:  # read now: the node samplers wrote during the run
        name = path.stem
        try:
            text = path.read_text()
        except OSError as exc:
            return cap_result(
                "capacity.gpu_memory",
                Status.NO_DATA,
                f"--gpu-curve {path}: cannot be read ({exc.strerror})",
                {},
                (),
                critical=False,
            )
        merged, peaks = merge_gpu_curve(text, name, timeline)
        rel = f"memory/gpu-{name}.csv"
        ctx.bundle.write_text(rel, merged)
        evidence.append(rel)
        measurements.update({f"{name}:{k}": round(v, 1) for k, v in peaks.items()})
    top = max(measurements.values(), default=None)
    summary = f"GPU memory curves from {len(inputs.gpu_curves)} node(s) merged by phase"
    if top is not None:
        summary += f"; peak {top:.0f} MiB"
    return cap_result(
        "capacity.gpu_memory",
        Status.PASS if measurements else Status.NO_DATA,
        summary,
        measurements,
        evidence,
        critical=False,
    )
