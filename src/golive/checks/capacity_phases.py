"""Phases 2-4 of `golive capacity` and the recipe that runs all four under the samplers."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from golive.checks.capacity import (
    CapacityInputs,
    Run,
    cap_result,
    classified,
    engine_probe,
    gauge_max,
    gauge_mean,
    merge_curves,
    model_load,
    refusal,
    seconds,
    served_model,
)
from golive.checks.capacity_rules import (
    Action,
    Classification,
    LongOutcome,
    LongStep,
    StabilityPolicy,
    StepStats,
    classify_concurrency,
    classify_long_input,
    classify_sustained,
    percentile,
    trend,
)
from golive.checks.context import CheckContext, scrape, tokens_per_word
from golive.gpu_curve import PhaseSpan
from golive.metrics import MetricsDelta
from golive.results import CheckResult, Status
from golive.sampling import Probe, host_probe, nvml_probe, sampling
from golive.traffic.records import ParsedResponse, error_message, parse
from golive.traffic.schedule import Schedule, run_schedule
from golive.traffic.workload import AgentWorkload, WorkloadShape, filler

_CONTEXT_ERROR = ("maximum context length", "max_model_len", "context length", "too long")
_TEMPLATE_OVERHEAD = 32  # chat-template tokens around one user message
FRACTIONS = (0.125, 0.25, 0.5, 0.75, 1.0)
WATCHDOG = "metrics/capacity-watchdog.jsonl"  # each load window's caps and how it ended
CLIENTS = "metrics/capacity-clients.jsonl"  # --ray: each client's share of each window


async def run_capacity(ctx: CheckContext, inputs: CapacityInputs) -> list[CheckResult]:
    """Phase 1, then 2-4 under the memory and engine samplers; stop on engine death."""
    model, max_model_len = await served_model(ctx)
    if model is None:
        return [
            cap_result(
                "capacity.long_input",
                Status.NO_DATA,
                "no served model: /v1/models did not answer",
                {},
                (),
            )
        ]
    run = Run(ctx, inputs, model, max_model_len)
    probes: list[Probe] = []
    if inputs.target_pid is not None:
        probes.append(host_probe(inputs.target_pid))
    gpu = nvml_probe()
    if gpu is not None:
        probes.append(gpu)
    probes.append(engine_probe(ctx))
    results = [model_load(run)]
    if inputs.load_span is not None:
        run.timeline.append(PhaseSpan("model_load", *inputs.load_span))
    phases: tuple[tuple[str, Callable[[Run], Any]], ...] = (
        ("long_input", long_input),
        ("concurrency", concurrency_ramp),
        ("sustained", sustained),
    )
    async with sampling(ctx.bundle, "memory/capacity.csv", probes, 0.2, lambda: run.phase) as curve:
        run.memory = curve
        for name, phase in phases:
            if run.dead.is_set():
                results.append(
                    cap_result(
                        f"capacity.{name}",
                        Status.FAIL,
                        f"not run: the engine terminated earlier ({run.death})",
                        {"classification": Action.EXPAND_CAPACITY.value},
                        ("memory/termination.json",),
                    )
                )
                continue
            run.phase = name
            started = time.time()
            results.append(await phase(run))
            run.timeline.append(PhaseSpan(name, started, time.time()))
    ctx.bundle.write_json(
        "metrics/capacity-phases.json",
        [{"phase": s.phase, "start": s.start, "end": s.end} for s in run.timeline],
    )
    if inputs.gpu_curves:
        results.append(merge_curves(ctx, inputs, run.timeline))
    return results


def _long_body(run: Run, context: int, ratio: float, n: int) -> dict[str, Any]:
    max_tokens = run.ctx.config.capacity.long_max_tokens
    words = max(1, int((context - max_tokens - _TEMPLATE_OVERHEAD) / ratio))
    return {
        "model": run.model,
        "messages": [
            {"role": "user", "content": f"Summarise in one line:\n{filler(words, 50_000 + n)}"}
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def long_input(run: Run) -> CheckResult:
    """Phase 2: fixed samples at increasing context, and one just above max_model_len."""
    config = run.ctx.config.capacity
    max_context = config.max_context or run.max_model_len or 4096
    ratio, how = await tokens_per_word(run.ctx, run.model)
    contexts = [int(max_context * f) for f in FRACTIONS]
    if run.max_model_len is not None:
        contexts.append(run.max_model_len + 64)
    run.inputs.progress.phase("long input", float(len(contexts)))
    steps: list[LongStep] = []
    prompt_tokens: dict[int, int | None] = {}
    for n, context in enumerate(sorted(set(contexts))):
        parsed = parse(
            await run.send(
                _long_body(run, context, ratio, n), f"long-{context}", time.perf_counter_ns()
            )
        )
        outcome, detail = _long_outcome(parsed)
        if outcome is LongOutcome.FAILED and not await run.check_alive(detail):
            outcome = LongOutcome.DIED
        usage = parsed.usage or {}
        prompt_tokens[context] = usage.get("prompt_tokens")
        steps.append(LongStep(context, outcome, detail, prompt_tokens[context]))
        if outcome is LongOutcome.DIED:
            break
    recovered = run.dead.is_set() is False and await run.check_alive("health after long inputs")
    result = classify_long_input(steps, max_context, run.max_model_len)
    measurements: dict[str, Any] = {
        "max_context": max_context,
        "max_model_len": run.max_model_len,
        "tokens_per_word": round(ratio, 3),
        "calibration": how,
        "generation_limit": config.long_max_tokens,
        "sampling": "temperature=0",
        "recovered_after_rejections": recovered,
        **{f"step_{s.context_tokens}": s.outcome.value for s in steps},
        **{f"prompt_tokens_{k}": v for k, v in prompt_tokens.items() if v is not None},
    }
    return classified(
        "capacity.long_input",
        result,
        measurements,
        ("requests/capacity-long_input.jsonl", "memory/capacity.csv"),
    )


def _long_outcome(parsed: ParsedResponse) -> tuple[LongOutcome, str]:
    record = parsed.record
    if record.ok and not parsed.problems:
        return LongOutcome.ACCEPTED, "served"
    message = error_message(parsed.json_body) or (record.failure.message if record.failure else "")
    if record.status == 400 and any(k in message.lower() for k in _CONTEXT_ERROR):
        return LongOutcome.REJECTED, message[:200]
    if record.status is not None and 400 <= record.status < 500:
        return LongOutcome.REFUSED, f"HTTP {record.status}: {message}"[:200]
    return LongOutcome.FAILED, (message or "; ".join(parsed.problems))[:200]


def ramp(top: int) -> list[int]:
    """1, 2, 4, ... up to and including `top`."""
    steps, c = [], 1
    while c < top:
        steps.append(c)
        c *= 2
    return [*steps, top]


def workload(run: Run) -> Callable[[int], dict[str, Any]]:
    if run.inputs.sample:
        sample = run.inputs.sample
        return lambda n: {**sample[n % len(sample)], "model": run.model}
    c = run.ctx.config.capacity
    shape = WorkloadShape(
        system_prompt_words=c.system_prompt_words,
        tools=c.tools,
        turns=c.turns,
        long_share=c.long_share,
        long_prompt_words=c.long_prompt_words,
        structured_share=c.structured_share,
        max_tokens=c.max_tokens,
    )
    return AgentWorkload(shape, run.model).body


async def _step(
    run: Run, concurrency: int, duration_s: float, cap: int, offset: int
) -> tuple[StepStats, list[ParsedResponse]]:
    """One fixed-concurrency window, with the engine's counters read before and after."""
    run.concurrency = concurrency
    before = await scrape(run.ctx, f"capacity-c{concurrency}-before")
    make = workload(run)
    first_row = len(run.memory.rows) if run.memory else 0
    schedule = Schedule(
        "concurrency",
        duration_s=duration_s,
        max_requests=cap,
        concurrency=concurrency,
        drain_s=drain_s(run.ctx.config.capacity.drain_s, duration_s),
    )
    clients = run.inputs.clients
    if clients is None:
        loaded = await run_schedule(
            schedule,
            run.send,
            lambda n: make(offset + n),
            f"c{concurrency}",
            stop=run.dead,
            abort=run.ctx.target.abort_in_flight,
        )
    else:
        seen = len(clients.windows)
        loaded = await clients.run(
            schedule,
            lambda n: make(offset + n),
            f"c{concurrency}",
            run.received,
            f"{run.phase}-c{concurrency}",
        )
        for window in clients.windows[seen:]:
            run.ctx.bundle.append_jsonl(
                CLIENTS, {"phase": run.phase, "window_concurrency": concurrency, **asdict(window)}
            )
    run.ctx.bundle.append_jsonl(
        WATCHDOG,
        {
            "phase": run.phase,
            "concurrency_cap": concurrency,
            "request_cap": cap,
            "duration_s": duration_s,
            "drain_s": schedule.drain_s,
            "wall_s": round(loaded.wall_s, 3),
            "stopped_by": loaded.stopped_by,
            "peak_in_flight": loaded.peak_in_flight,
            "requests": len(loaded.records),
            "cancelled_without_record": loaded.cancelled,
        },
    )
    after = await scrape(run.ctx, f"capacity-c{concurrency}-after")
    window = run.memory.rows[first_row:] if run.memory else []
    parsed = [parse(r) for r in loaded.records]
    ok = [p for p in parsed if p.record.ok and not p.problems]
    queue_mean = preemptions = None
    if before.snapshot is not None and after.snapshot is not None:
        delta = MetricsDelta(before.snapshot, after.snapshot)
        hist = delta.histogram("request_queue_time_seconds")
        queue_mean = hist.mean if hist is not None else None
        preemptions = delta.counter("num_preemptions")
    e2e = [p.e2e_ms for p in ok if p.e2e_ms is not None]
    refused = [p for p in parsed if p.record.status is not None and 400 <= p.record.status < 500]
    stats = StepStats(
        concurrency=concurrency,
        completed=len(ok),
        errors=len(parsed) - len(ok),
        wall_s=loaded.wall_s,
        e2e_p50_s=seconds(percentile(e2e, 50)),
        e2e_p95_s=seconds(percentile(e2e, 95)),
        ttft_p95_s=seconds(percentile([p.ttft_ms for p in ok if p.ttft_ms is not None], 95)),
        queue_mean_s=queue_mean,
        max_waiting=gauge_max([r.get("num_requests_waiting") for r in window]),
        max_running=gauge_max([r.get("num_requests_running") for r in window]),
        preemptions=preemptions,
        engine_died=run.dead.is_set(),
        mean_waiting=gauge_mean([r.get("num_requests_waiting") for r in window]),
        refused=len(refused),
        refused_detail=refusal(refused[0]) if refused else "",
    )
    return stats, parsed


def drain_s(configured: float | None, duration_s: float) -> float:
    """How long requests in flight may finish after a phase's time is up."""
    return configured if configured is not None else min(120.0, duration_s * 3)


async def concurrency_ramp(run: Run) -> CheckResult:
    """Phase 3: the production-shaped sample on a concurrency ramp up to --concurrency."""
    config = run.ctx.config.capacity
    policy = StabilityPolicy(max_queue_s=config.max_queue_s, max_queue_share=config.max_queue_share)
    steps: list[StepStats] = []
    offset = 0
    stable_so_far: list[StepStats] = []
    levels = ramp(config.concurrency)
    run.inputs.progress.phase("concurrent agent traffic", config.step_duration_s * len(levels))
    for level in levels:
        stats, answered = await _step(
            run, level, config.step_duration_s, config.step_max_requests, offset
        )
        offset += len(answered)
        steps.append(stats)
        run.ctx.bundle.append_jsonl("metrics/capacity-steps.jsonl", stats.to_json())
        if classify_concurrency([*stable_so_far, stats], policy).ceiling != stats.concurrency:
            break  # the ceiling is known; more load past it proves nothing
        stable_so_far.append(stats)
    result = classify_concurrency(steps, policy)
    measurements: dict[str, Any] = {"steps": len(steps), "ceiling": result.ceiling}
    for s in steps:
        measurements[f"c{s.concurrency}_rps"] = round(s.throughput_rps, 3)
        measurements[f"c{s.concurrency}_e2e_p95_s"] = s.e2e_p95_s
        measurements[f"c{s.concurrency}_queue_mean_s"] = s.queue_mean_s
        measurements[f"c{s.concurrency}_max_waiting"] = s.max_waiting
    run.concurrency_ceiling = result.ceiling
    evidence = [
        "requests/capacity-concurrency.jsonl",
        "metrics/capacity-steps.jsonl",
        "memory/capacity.csv",
    ]
    if run.dead.is_set():
        evidence.append("memory/termination.json")
    return classified("capacity.concurrency", result, measurements, evidence)


async def sustained(run: Run) -> CheckResult:
    """Phase 4: fixed concurrency and known mix for --duration; the latency trend decides."""
    config = run.ctx.config.capacity
    level = min(config.concurrency, run.concurrency_ceiling or config.concurrency)
    run.inputs.progress.phase("sustained", config.duration_s)
    cap = max(config.step_max_requests, int(config.duration_s * level))
    stats, parsed = await _step(run, level, config.duration_s, cap, 1_000_000)
    ok = [p for p in parsed if p.record.ok and not p.problems]
    t0 = min((p.record.timings.sent_ns for p in parsed), default=0)
    done = [(((p.record.timings.end_ns or t0) - t0) / 1e9, (p.e2e_ms or 0) / 1000) for p in ok]
    latency = trend(done)
    windows = _window_throughput(sorted(t for t, _ in done), config.duration_s)
    result = classify_sustained(
        latency,
        windows,
        stats.errors,
        len(parsed),
        stats.engine_died,
        level,
        refused=stats.refused,
        refused_detail=stats.refused_detail,
        preemptions=stats.preemptions,
    )
    if result.action is Action.STABLE and not stats.engine_measured:
        result = Classification(
            Action.NO_DATA,
            "the engine's queue gauges and queue-time histogram could not be read under "
            "sustained load, so queue growth cannot be ruled out (is --metrics-url a vLLM "
            "/metrics?)",
        )
    measurements: dict[str, Any] = {
        "concurrency": level,
        "duration_s": config.duration_s,
        "completed": stats.completed,
        "errors": stats.errors,
        "throughput_rps": round(stats.throughput_rps, 3),
        "e2e_p50_s": stats.e2e_p50_s,
        "e2e_p95_s": stats.e2e_p95_s,
        "latency_slope_s_per_s": None if latency is None else round(latency.slope, 6),
        "latency_slope_ci_low": None if latency is None else round(latency.low, 6),
        "latency_slope_ci_high": None if latency is None else round(latency.high, 6),
        "latency_growth": None if latency is None else round(latency.relative_growth, 4),
        "preemptions": stats.preemptions,
        "refused_4xx": stats.refused,
        "window_rps": ", ".join(f"{w:.2f}" for w in windows),
    }
    evidence = ["requests/capacity-sustained.jsonl", "memory/capacity.csv"]
    return classified("capacity.sustained", result, measurements, evidence)


def _window_throughput(
    done_at: Sequence[float], duration_s: float, windows: int = 6
) -> list[float]:
    if not done_at:
        return []
    width = max(duration_s, *done_at) / windows
    counts = [0] * windows
    for t in done_at:
        counts[min(windows - 1, int(t / width))] += 1
    return [c / width for c in counts]
