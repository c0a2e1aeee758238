"""The pressure phases' curves: the engine's gauges sampled beside the memory (2 Hz), the
model-load evidence (the startup log, `memory/load.csv`) and node-side GPU curves merged by
phase."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from golive.bundle.layout import DCGM_FREE, DCGM_USED, LOAD_CURVE, RAY_GPU_CURVE, STARTUP_LOG
from golive.checks.capacity.collect import CapacityInputs, Run, cap_result
from golive.checks.context import CheckContext, scrape
from golive.evidence import dcgm
from golive.evidence.gpu_curve import PhaseSpan, merge_gpu_curve
from golive.evidence.sampling import Probe
from golive.results import CheckResult, Status
from golive.traffic.client import ClientSettings, TargetClient

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


async def node_curves_of(
    ctx: CheckContext, inputs: CapacityInputs, timeline: list[PhaseSpan]
) -> tuple[list[tuple[str, str]], str | None]:
    """Every node-side GPU curve: the `--gpu-curve` files (read now: the node samplers wrote
    during the run) and, with `capacity.prometheus_url`, the DCGM exporter's series over the
    run. ([(name, csv text)], the first problem met or None)."""
    curves: list[tuple[str, str]] = []
    for path in inputs.gpu_curves:
        try:
            curves.append((path.stem, path.read_text()))
        except OSError as exc:
            return curves, f"--gpu-curve {path}: cannot be read ({exc.strerror})"
    if ctx.config.capacity.prometheus_url is None or not timeline:
        return curves, None
    try:
        return curves + await _dcgm_curves(ctx, timeline), None
    except Exception as exc:
        return curves, f"the DCGM curves could not be read: {type(exc).__name__}: {exc}"


async def _dcgm_curves(ctx: CheckContext, timeline: list[PhaseSpan]) -> list[tuple[str, str]]:
    """One curve per node from the DCGM exporter's series over the run; ValueError naming
    what is wrong with the answer."""
    config = ctx.config.capacity
    assert config.prometheus_url is not None
    assert config.dcgm_selector is not None
    answers: dict[str, list[dict[str, Any]]] = {}
    settings = ClientSettings(config.prometheus_url, read_timeout_s=30, request_deadline_s=60)
    async with TargetClient(settings) as client:
        for metric, saved in ((dcgm.USED, DCGM_USED), (dcgm.FREE, DCGM_FREE)):
            url = dcgm.query_path(
                config.prometheus_url,
                metric,
                config.dcgm_selector,
                timeline[0].start,
                timeline[-1].end,
            )
            record = await client.get(url, "dcgm")
            ctx.bundle.write_text(saved, record.raw_text)
            if record.status is None:
                why = record.failure.message if record.failure else "no answer"
                raise ValueError(f"{config.prometheus_url} did not answer ({why})")
            answers[metric] = dcgm.series_of(record.raw_text, saved)  # names an error body
    if not answers[dcgm.USED]:
        raise ValueError(
            f"{config.prometheus_url} holds no {dcgm.USED} series matching "
            f"{{{config.dcgm_selector}}} over the run: check capacity.dcgm_selector"
        )
    by_node = dcgm.node_curves(answers[dcgm.USED], answers[dcgm.FREE])
    return [(f"dcgm-{node}", text) for node, text in by_node.items()]


def merge_curves(
    ctx: CheckContext,
    curves: list[tuple[str, str]],
    problem: str | None,
    timeline: list[PhaseSpan],
    unsampled: Sequence[str] = (),
) -> CheckResult:
    """Node-side GPU curves merged by wall clock: peak memory per phase and GPU; `unsampled`
    names the Ray nodes (or the sampler job) that gave none, which leaves the check
    `no_data` beside the curves that came."""
    # the exporter's own answers as Prometheus gave them (capacity.prometheus_url), and the
    # Ray nodes' samplers' lines (--chain-ray)
    saved = (DCGM_USED, DCGM_FREE, RAY_GPU_CURVE)
    evidence = [p for p in saved if ctx.bundle.path(p).exists()]
    if problem is not None:
        return cap_result(
            "capacity.gpu_memory", Status.NO_DATA, problem, {}, evidence, critical=False
        )
    measurements: dict[str, Any] = {}
    for name, text in curves:
        merged, peaks = merge_gpu_curve(text, name, timeline)
        rel = f"memory/gpu-{name}.csv"
        ctx.bundle.write_text(rel, merged)
        evidence.append(rel)
        measurements.update({f"{name}:{k}": round(v, 1) for k, v in peaks.items()})
    top = max(measurements.values(), default=None)
    summary = f"GPU memory curves from {len(curves)} node(s) merged by phase"
    if top is not None:
        summary += f"; peak {top:.0f} MiB"
    if unsampled:
        summary += f"; not sampled: {'; '.join(unsampled)}"
    return cap_result(
        "capacity.gpu_memory",
        Status.PASS if measurements and not unsampled else Status.NO_DATA,
        summary,
        measurements,
        evidence,
        critical=False,
    )
