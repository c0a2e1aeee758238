"""The pressure phases' curves: the engine's gauges sampled beside the memory (2 Hz), the
model-load evidence (the startup log, `memory/load.csv`) and node-side GPU curves merged by
phase."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence

from golive.bundle.layout import DCGM_FREE, DCGM_USED, LOAD_CURVE, NODE_CURVES, STARTUP_LOG
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import CapacityInputs, CapacityRun
from golive.checks.capacity.node_curves import (
    curve_copy,
    gpu_memory_of,
    merged_name,
    read_node_curves,
)
from golive.checks.context import CheckContext, scrape
from golive.evidence import dcgm
from golive.evidence.gpu_curve import PhaseSpan, merge_gpu_curve
from golive.evidence.sampling import Probe
from golive.results import CheckResult
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


def save_load_evidence(run: CapacityRun) -> None:
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


async def save_node_curves(
    ctx: CheckContext,
    inputs: CapacityInputs,
    timeline: list[PhaseSpan],
    sampler_problems: Sequence[str],
) -> list[CheckResult]:
    """Every node-side GPU curve the run asked for, kept as read — the `--gpu-curve` files
    (read now: the node samplers wrote during the run), the DCGM exporter's answers over the
    run (`capacity.prometheus_url`), beside the Ray samplers' lines already appended — with
    what only the run could see (`memory/node-curves.json`); then `capacity.gpu_memory`
    judged from them as `golive decide` judges it, and each curve merged by phase for the
    report."""
    if not (inputs.gpu_curves or ctx.config.capacity.prometheus_url or inputs.ray_gpu):
        return []
    problems = list(sampler_problems)
    copies: list[dict[str, str]] = []
    for path in inputs.gpu_curves:
        try:
            text = path.read_text()
        except OSError as exc:
            problems.append(f"--gpu-curve {path}: cannot be read ({exc.strerror})")
            continue
        # two nodes' node1-gpu.csv (or names alike once made safe) are kept apart
        taken = {c["file"] for c in copies}
        name = next(
            n for k in range(len(copies) + 1) if curve_copy(n := _nth(path.stem, k)) not in taken
        )
        copies.append({"name": name, "file": curve_copy(name)})
        ctx.bundle.write_text(copies[-1]["file"], text)
    dcgm_asked = ctx.config.capacity.prometheus_url is not None and bool(timeline)
    if dcgm_asked:
        try:
            await _dcgm_answers(ctx, timeline)
        except Exception as exc:
            problems.append(f"the DCGM curves could not be read: {type(exc).__name__}: {exc}")
    record = {
        "gpu_curves": copies,
        "ray": inputs.ray_gpu is not None,
        "dcgm": dcgm_asked,
        "problems": problems,
    }
    ctx.bundle.write_json(NODE_CURVES, record)
    found = read_node_curves(BundleReader(ctx.bundle.root), ctx.config)
    for name, text in found.curves if found else ():
        with contextlib.suppress(Exception):  # judged (and named) by gpu_memory_of
            ctx.bundle.write_text(merged_name(name), merge_gpu_curve(text, name, timeline)[0])
    return gpu_memory_of(found)  # as judge_gpu_memory judges it again, from the same reading


def _nth(stem: str, k: int) -> str:
    return stem if k == 0 else f"{stem}-{k}"


async def _dcgm_answers(ctx: CheckContext, timeline: list[PhaseSpan]) -> None:
    """The DCGM exporter's used and free series over the run, kept as Prometheus answered;
    ValueError where it did not answer (nothing is kept then)."""
    config = ctx.config.capacity
    assert config.prometheus_url is not None
    assert config.dcgm_selector is not None
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
            if record.status is None:
                why = record.failure.message if record.failure else "no answer"
                raise ValueError(f"{config.prometheus_url} did not answer ({why})")
            ctx.bundle.write_text(saved, record.raw_text)
