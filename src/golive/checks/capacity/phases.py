"""Phases 3-4 of `golive capacity` and the recipe that runs all four under the samplers
(phase 2, the long-input ladder, is `long_ladder`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from golive.bundle.layout import (
    ANSWER_PROBES_PLAN,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_PHASES,
    CAPACITY_SETUP_REQUESTS,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_WORKLOAD,
    GPU_DEVICES,
    MEMORY_CURVE,
    WORKLOAD_SAMPLE,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.answer_probes import ProbeSlots, judge_answers, probe_lanes, send_idle
from golive.checks.capacity.collect import CapacityInputs, CapacityRun
from golive.checks.capacity.curves import (
    engine_probe,
    save_load_evidence,
    save_node_curves,
)
from golive.checks.capacity.judge import (
    after_death,
    judge_headroom,
    judge_ramp,
    judge_sustained,
    stability_policy,
)
from golive.checks.capacity.latency_files import save_latency_set
from golive.checks.capacity.load_window import (
    CALIBRATION_CAP,
    calibrate,
    load_window,
    ramp,
    window_cap,
)
from golive.checks.capacity.long_ladder import long_input
from golive.checks.capacity.measured import ramp_ceiling
from golive.checks.capacity.memory import judge_memory
from golive.checks.capacity.model_load import judge_model_load
from golive.checks.capacity.restart import served_again
from golive.checks.capacity.rules import ramp_next
from golive.checks.capacity.sample_tokens import count_sample_tokens
from golive.checks.capacity.slo import slo_of
from golive.checks.capacity.slo_objectives import sustained_answers
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.windows import MIN_DRIFT_COMPLETIONS
from golive.checks.context import CheckContext, compressed, packed, served_model
from golive.checks.coverage import with_sustained_coverage
from golive.evidence.gpu_curve import PhaseSpan
from golive.evidence.ray_gpu_curve import ray_gpu_sampling
from golive.evidence.sampling import Probe, host_probe, nvml_inventory, nvml_probe, sampling
from golive.results import CAPACITY_RESULT, CheckResult, Status
from golive.traffic.headroom import thaw


async def run_capacity(ctx: CheckContext, inputs: CapacityInputs) -> list[CheckResult]:
    """Phase 1, then 2-4 under the memory and engine samplers; stop on engine death."""
    served = await served_model(ctx, "capacity-setup")
    if served is None:
        return [
            CAPACITY_RESULT(
                "capacity.long_input",
                Status.NO_DATA,
                "no served model: /v1/models did not answer",
            )
        ]
    run = CapacityRun(ctx, inputs, served.model, served.max_model_len)
    ctx.bundle.write_json(CAPACITY_WORKLOAD, {"seed": run.workload_seed})
    for body in inputs.sample:  # what the windows cycle through: the report compares with it
        ctx.bundle.append_jsonl(WORKLOAD_SAMPLE, {**body, "model": served.model})
    await count_sample_tokens(ctx, served.model, inputs.sample)
    probes: list[Probe] = run.probes
    if inputs.target_pid is not None:
        probes.append(host_probe(inputs.target_pid))
    gpu = nvml_probe()
    if gpu is not None:
        probes.append(gpu)
    # what golive's own host has, an empty list where NVML saw none: the GPUs are the
    # nodes' to show only where golive said so (a deleted inventory is not a GPU-less host)
    ctx.bundle.write_json(GPU_DEVICES, nvml_inventory() if gpu is not None else [])
    probes.append(engine_probe(ctx))
    save_load_evidence(run)
    results = [judge_model_load(BundleReader(run.ctx.bundle.root))]
    if inputs.load_span is not None:
        run.timeline.append(PhaseSpan("model_load", *inputs.load_span))
    phases: tuple[tuple[str, Callable[[CapacityRun], Any]], ...] = (
        ("long_input", long_input),
        ("concurrency", concurrency_ramp),
        ("sustained", sustained),
    )
    if ctx.config.capacity.answer_probes:  # with load clients, the probes go from here
        run.probes_at_idle = await send_idle(ctx, served.model)  # the reference, before any load
    async with (
        ray_gpu_sampling(inputs.ray_gpu, ctx.bundle, inputs.progress.phase) as sampler_problems,
        sampling(ctx.bundle, MEMORY_CURVE, probes, 0.2, lambda: run.phase) as curve,
    ):
        run.memory = curve
        for name, phase in phases:
            if run.dead.is_set() and name == "sustained":  # sustained measures the ceiling
                await served_again(run)
            if run.dead.is_set():  # not measured: no_data, never a failure with a cause
                results.append(not_run(run, f"capacity.{name}"))
                continue
            run.phase = name
            started = time.time()
            result = await phase(run)
            run.timeline.append(PhaseSpan(name, started, time.time()))
            results += _phase_results(
                ctx, name, packed(ctx, result, f"requests/capacity-{name}.jsonl")
            )
    if ctx.config.slo.stated:  # the load windows held to the SLOs, as decide does
        results.append(slo_of(ctx, results))
    if ctx.config.capacity.answer_probes:  # judged whenever probes were sent, as decide does
        critical = ctx.profile.capacity.answers_under_load_critical
        results += judge_answers(BundleReader(ctx.bundle.root), critical)
    ctx.bundle.write_json(
        CAPACITY_PHASES,
        [{"phase": s.phase, "start": s.start, "end": s.end} for s in run.timeline],
    )
    save_latency_set(ctx.bundle, ctx.config.slo)
    merged = await save_node_curves(ctx, inputs, run.timeline, sampler_problems)
    # judged once the nodes' curves and the phases' timeline are in the bundle
    results += judge_memory(BundleReader(ctx.bundle.root), ctx.config)
    compressed(ctx, CAPACITY_SETUP_REQUESTS)
    thaw()
    if run.windows:
        results.append(judge_headroom(BundleReader(ctx.bundle.root)))
    return results + merged


def _phase_results(ctx: CheckContext, name: str, result: CheckResult) -> list[CheckResult]:
    """A phase's check, with the sustained window's coverage (whether it is long enough for
    a programme decision)."""
    if name == "sustained":
        return with_sustained_coverage(
            result, ctx.config.programme, ctx.config.capacity, ctx.profile
        )
    return [result]


def not_run(run: CapacityRun, check_id: str) -> CheckResult:
    """A phase after the engine's death, as `golive decide` reads it from the termination
    record (`after_death`)."""
    reader = BundleReader(run.ctx.bundle.root)
    return after_death(reader, check_id) or CAPACITY_RESULT(
        check_id,
        Status.NO_DATA,
        f"not run: the engine terminated earlier ({run.death})",
    )


async def concurrency_ramp(run: CapacityRun) -> CheckResult:
    """Phase 3: the production-shaped sample on a concurrency ramp up to --concurrency."""
    config = run.ctx.config.capacity
    policy = stability_policy(config)
    steps: list[StepStats] = []
    stable_so_far: list[StepStats] = []
    repeats: dict[int, list[StepStats]] = {}
    levels = ramp(config.concurrency)
    # at most: a window per level, and the repeats around a candidate knee
    windows = len(levels) + 2 * (config.knee_repeats - 1)
    run.inputs.progress.phase(
        "concurrent agent traffic", config.calibration_s + config.step_duration_s * windows
    )
    run.rate_per_slot = await calibrate(run)
    offset = CALIBRATION_CAP
    for level in levels:
        cap = window_cap(run, level, config.step_duration_s, run.rate_per_slot)
        stats, answered = await load_window(run, level, config.step_duration_s, cap, offset)
        offset += len(answered)
        steps.append(stats)
        run.ramp_steps[level] = stats
        # the next cap is sized from the fastest per-slot rate measured so far: a calibration
        # slowed by a first-request cost must not end the next window early on its cap
        run.rate_per_slot = max(run.rate_per_slot, stats.throughput_rps / level)
        run.ctx.bundle.append_jsonl(CAPACITY_STEPS, {**stats.to_json(), "request_cap": cap})
        then = ramp_next(stable_so_far, stats, policy, repeats, config.knee_repeats)
        if then == "repeat":  # a candidate knee: measured again before it is believed
            offset = await repeat_knee(run, (stable_so_far[-1].concurrency, level), repeats, offset)
            then = ramp_next(stable_so_far, stats, policy, repeats, 1)
        if then != "continue":
            break  # the ceiling is known; more load past it proves nothing
        stable_so_far.append(stats)
    ramp_check = judge_ramp(BundleReader(run.ctx.bundle.root), config)
    run.concurrency_ceiling = ramp_ceiling(ramp_check.measurements)
    return ramp_check


async def repeat_knee(
    run: CapacityRun, levels: tuple[int, int], repeats: dict[int, list[StepStats]], offset: int
) -> int:
    """The two steps around a candidate knee, `capacity.knee_repeats - 1` more times each,
    alternating which goes first (the ramp ran the lower first); each window labelled
    `c<N>r<k>` in the records and scrapes, its row in `metrics/capacity-knee-repeats.jsonl`.
    Stops at an engine death (that window says so). Returns the next prompt offset."""
    config = run.ctx.config.capacity
    lower, upper = levels
    for number in range(1, config.knee_repeats):
        for level in (upper, lower) if number % 2 else (lower, upper):
            label = f"c{level}r{len(repeats.get(level, ())) + 1}"
            cap = window_cap(run, level, config.step_duration_s, run.rate_per_slot)
            stats, answered = await load_window(
                run, level, config.step_duration_s, cap, offset, label=label
            )
            offset += len(answered)
            repeats.setdefault(level, []).append(stats)
            row = {**stats.to_json(), "label": label, "request_cap": cap}
            run.ctx.bundle.append_jsonl(CAPACITY_KNEE_REPEATS, row)
            if stats.engine_died:
                return offset
    return offset


def sustained_length(
    duration_s: float, measured_rps: float | None, answers: int = MIN_DRIFT_COMPLETIONS
) -> float:
    """The sustained window: `capacity.duration_s`, lengthened (at most 2x) to what the
    ramp's rate at that level needs for it to be judged (`answers`: at least the
    MIN_DRIFT_COMPLETIONS a drift needs, and what the stated SLOs need; +25%): a slow engine
    given too short a window measures nothing."""
    if not measured_rps:
        return duration_s
    needed = max(answers, MIN_DRIFT_COMPLETIONS) * 1.25 / measured_rps
    return round(min(max(duration_s, needed), 2 * duration_s), 1)


async def sustained(run: CapacityRun) -> CheckResult:
    """Phase 4: fixed concurrency and known mix for --duration; the latency trend decides."""
    config = run.ctx.config.capacity
    if run.concurrency_ceiling is None:  # no stable level to sustain: more load proves nothing
        return judge_sustained(BundleReader(run.ctx.bundle.root), config)  # says "not run"
    level = min(config.concurrency, run.concurrency_ceiling)
    if not run.rate_per_slot:
        run.rate_per_slot = await calibrate(run)
    step = run.ramp_steps.get(level)  # the ramp's step at this level, where it ran
    measured = step.throughput_rps if step else None
    rate = measured / level if measured else run.rate_per_slot
    lanes = probe_lanes(level) if run.probes_at_idle else 0
    # the workload's answers come from the slots the probes leave it
    workload_rps = measured * (level - lanes) / level if measured else None
    answers = sustained_answers(
        run.ctx.config.slo, step.completed if step else 0, config.min_sustained_completions
    )
    duration_s = sustained_length(config.duration_s, workload_rps, answers)
    run.inputs.progress.phase("sustained", duration_s)
    cap = window_cap(run, level, duration_s, rate)
    probes = None
    if run.probes_at_idle:  # the reference answers exist: probe under the same load
        where = f"sustained-c{level}"
        run.ctx.bundle.write_json(ANSWER_PROBES_PLAN, {"where": where, "lanes": lanes})
        if lanes:
            probes = ProbeSlots(run.ctx, run.model, where, config.probe_repeats, lanes)
    scrapes = f"capacity-sustained-c{level}"  # apart from the ramp step's at the same level
    stats, _ = await load_window(
        run, level, duration_s, cap, 1_000_000, probes=probes, scrapes=scrapes
    )
    row = {
        **stats.to_json(),
        "request_cap": cap,
        "label": f"c{level}",
        "scrapes": scrapes,
        "window_s": duration_s,
    }
    run.ctx.bundle.write_json(CAPACITY_SUSTAINED, row)
    return judge_sustained(BundleReader(run.ctx.bundle.root), config)
