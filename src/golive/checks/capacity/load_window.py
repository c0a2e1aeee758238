"""Load windows of the pressure phases: one fixed-concurrency window with the engine's
counters read around it, the calibration window that measures the request rate, and request
caps sized from that rate (never from an assumed speed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from golive.bundle.layout import CAPACITY_CALIBRATION, CAPACITY_CLIENTS, CAPACITY_WATCHDOG
from golive.capacity_config import CapacityConfig
from golive.checks.capacity.answer_probes import ProbeSlots, is_probe
from golive.checks.capacity.collect import (
    CapacityRun,
    LoadClients,
    refusal,
    seconds,
)
from golive.checks.capacity.failures import cancelled, server_errors
from golive.checks.capacity.recorded import gauge_figures
from golive.checks.capacity.stalls import (
    HealthWatch,
    flight,
    idle_silence_s,
    stall_after_s,
    stall_in,
)
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.window_sizing import request_cap, window_coverage
from golive.checks.context import scrape
from golive.evidence.sampling import running_beside
from golive.metrics import MetricsDelta
from golive.quantiles import percentile, quantile
from golive.traffic.headroom import ClientMonitor, HeadroomPolicy, bottleneck, collector_paused
from golive.traffic.load_split import (
    ClientWindow,
    Offset,
    main_window,
    stopped_by,
    window_headroom,
)
from golive.traffic.records import ParsedResponse, RequestRecord, parse
from golive.traffic.retry import attempt_counts, judged
from golive.traffic.schedule import (
    LoadResult,
    MakeBody,
    Schedule,
    Send,
    cancel_all,
    run_schedule,
)
from golive.traffic.workload import AgentWorkload, SampleWorkload, WorkloadShape


def ramp(top: int) -> list[int]:
    """1, 2, 4, ... up to and including `top`."""
    steps, c = [], 1
    while c < top:
        steps.append(c)
        c *= 2
    return [*steps, top]


def workload(run: CapacityRun) -> Callable[[int], dict[str, Any]]:
    """The run's request bodies (a method of a plain object: it travels to --workers)."""
    if run.inputs.sample:
        return SampleWorkload(run.inputs.sample, run.model).body
    return AgentWorkload(capacity_shape(run.ctx.config.capacity, run.workload_seed), run.model).body


def capacity_shape(c: CapacityConfig, seed: int) -> WorkloadShape:
    """The load workload's shape as `capacity:` sets it, its prompts the run's own (`seed`)."""
    return WorkloadShape(
        system_prompt_words=c.system_prompt_words,
        tools=c.tools,
        turns=c.turns,
        long_share=c.long_share,
        long_prompt_words=c.long_prompt_words,
        structured_share=c.structured_share,
        max_tokens=c.max_tokens,
        seed=seed,
    )


async def load_window(
    run: CapacityRun,
    concurrency: int,
    duration_s: float,
    cap: int,
    offset: int,
    label: str = "",
    probes: ProbeSlots | None = None,
    scrapes: str = "",
) -> tuple[StepStats, list[ParsedResponse]]:
    """One fixed-concurrency window, with the engine's counters read before and after
    (`metrics/<scrapes>-before.prom`, default `capacity-<label>`). `probes` (answer probes)
    take some of its slots; its figures leave them out."""
    run.concurrency = concurrency
    label = label or f"c{concurrency}"
    scrapes = scrapes or f"capacity-{label}"
    before = await scrape(run.ctx, f"{scrapes}-before")
    if not run.dead.is_set():
        run.closing.clear()  # retries allowed again, until this window ends
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
    monitor, health = ClientMonitor(), HealthWatch(run.ctx.target)
    if clients is None:
        send: Send = run.send
        body: MakeBody = Offset(make, offset)
        if probes is not None:
            send, body = _with_probes(run, probes, body)
        with collector_paused():
            async with running_beside(monitor.watch()), running_beside(health.poll()):
                loaded = await run_schedule(
                    schedule,
                    send,
                    body,
                    label,
                    stop=run.dead,
                    abort=run.close_window,
                )
    else:
        loaded, rows = await _clients_window(
            run, clients, schedule, Offset(make, offset), label, probes, health
        )
    attempts, parsed, (retries, timeouts) = _window_answers(run, loaded, label)
    ok = [p for p in parsed if p.record.ok and not p.problems]
    answered = set(map(id, ok))
    # latency from the intended send time: a request the client sent late is not a fast one
    e2e = [v for p in ok if (v := p.e2e_from_intended_ms) is not None]
    median = seconds(percentile(e2e, 50))
    if clients is None:
        client = monitor.figures(loaded.records)
        short = bottleneck(client, headroom(run), median)
    else:  # each client measured itself; the worst one speaks for the window
        client, short = window_headroom(rows, headroom(run), median)
    row = {
        "phase": run.phase,
        "label": label,  # c<N> a ramp step, c<N>r<k> a knee repeat, calibrate, ...
        "concurrency_cap": concurrency,
        "request_cap": cap,
        "duration_s": duration_s,
        "drain_s": schedule.drain_s,
        "wall_s": round(loaded.wall_s, 3),
        "stopped_by": loaded.stopped_by,
        "peak_in_flight": loaded.peak_in_flight,
        "requests": len(loaded.records),
        "cancelled_without_record": loaded.cancelled,
        "client": client.to_json(),
        "client_bottleneck": short,
    }
    run.windows.append(row)
    run.ctx.bundle.append_jsonl(CAPACITY_WATCHDOG, row)
    after = await scrape(run.ctx, f"{scrapes}-after")
    last_row = len(run.memory.rows) if run.memory else 0
    window = run.memory.rows[first_row:last_row] if run.memory else []
    gauges = gauge_figures(window)  # decide reads them again from the saved curve rows
    queue_mean = preemptions = None
    if before.snapshot is not None and after.snapshot is not None:
        delta = MetricsDelta(before.snapshot, after.snapshot)
        hist = delta.histogram("request_queue_time_seconds")
        queue_mean = hist.mean if hist is not None else None
        preemptions = delta.counter("num_preemptions")
    refused = [p for p in parsed if p.record.refused]
    failed = [p.saved_line() for p in parsed if id(p) not in answered]
    e2e_p95 = quantile(e2e, 95)
    ttft_p95 = quantile([v for p in ok if (v := p.ttft_from_intended_ms) is not None], 95)
    stats = StepStats(
        concurrency=concurrency,
        completed=len(ok),
        errors=len(parsed) - len(ok),
        wall_s=loaded.wall_s,
        e2e_p50_s=seconds(percentile(e2e, 50)),
        e2e_p95_s=seconds(e2e_p95.value),
        ttft_p95_s=seconds(ttft_p95.value),
        e2e_samples=e2e_p95.samples,
        e2e_p95_upper_s=seconds(e2e_p95.upper),
        ttft_samples=ttft_p95.samples,
        ttft_p95_upper_s=seconds(ttft_p95.upper),
        queue_mean_s=queue_mean,
        preemptions=preemptions,
        engine_died=run.dead.is_set(),
        refused=len(refused),
        refused_detail=refusal(refused[0]) if refused else "",
        server_errors=server_errors(failed),
        cancelled=cancelled(failed),
        coverage=window_coverage(
            duration_s,
            loaded.wall_s,
            loaded.stopped_by,
            cap,
            loaded.peak_in_flight,
            concurrency,
        )
        or short,
        retries=retries,
        timeouts=timeouts,
        curve_rows=(first_row, last_row) if run.memory else None,
        max_waiting=gauges["max_waiting"],
        max_running=gauges["max_running"],
        mean_waiting=gauges["mean_waiting"],
        engine_held=gauges["engine_held"],
        stall=stall_in(
            [flight(r) for r in attempts if not is_probe(r)],  # what decide reads again
            health.probes,
            stall_after_s(run.ctx.config.capacity.stall_s, run.idle_silence_s),
            concurrency,
        ),
    )
    return stats, parsed


PROBE_LANE_OFFSET = 10**9  # the main process's lanes number their workload requests apart


async def _clients_window(
    run: CapacityRun,
    clients: LoadClients,
    schedule: Schedule,
    make: MakeBody,
    label: str,
    probes: ProbeSlots | None,
    health: HealthWatch,
) -> tuple[LoadResult, list[ClientWindow]]:
    """A window from the load clients, and each client's row of it in the bundle, golive's
    own process among them: it receives and writes every record and keeps the probes' lanes
    (its figures are judged when it has lanes: `window_headroom`)."""
    seen = len(clients.windows)
    monitor = ClientMonitor()
    async with (
        running_beside(monitor.watch()),
        running_beside(health.poll()),
        running_beside(_stop_on_death(run, clients)),
    ):
        loaded, lane = await _from_clients(run, clients, schedule, make, label, probes)
    lanes = 0 if probes is None else probes.lanes
    rows = [*clients.windows[seen:], main_window(monitor.figures(lane), lane, lanes, loaded.wall_s)]
    for window in rows:
        run.ctx.bundle.append_jsonl(
            CAPACITY_CLIENTS,
            {"phase": run.phase, "window_concurrency": schedule.concurrency, **window.to_json()},
        )
    return loaded, rows


async def _from_clients(
    run: CapacityRun,
    clients: LoadClients,
    schedule: Schedule,
    make: MakeBody,
    label: str,
    probes: ProbeSlots | None,
) -> tuple[LoadResult, tuple[RequestRecord, ...]]:
    """A window from the load clients, and the records this process sent itself: with answer
    probes, their lanes stay here (the probes are judged here, against the answers taken at
    idle) and the clients carry the rest of the window's slots and request cap."""
    key = f"{run.phase}-{label}"
    if probes is None:
        return await clients.run(schedule, make, label, run, key), ()
    lanes = probes.lanes
    local_cap = max(1, schedule.max_requests * lanes // schedule.concurrency)
    shared = replace(
        schedule,
        concurrency=schedule.concurrency - lanes,
        max_requests=max(1, schedule.max_requests - local_cap),
    )
    here = replace(schedule, concurrency=lanes, max_requests=local_cap)
    send, body = _with_probes(run, probes, Offset(make, PROBE_LANE_OFFSET))
    lanes_run = (
        asyncio.ensure_future(clients.run(shared, make, label, run, key)),
        asyncio.ensure_future(
            run_schedule(here, send, body, label, stop=run.dead, abort=run.close_window)
        ),
    )
    try:
        far, near = await asyncio.gather(*lanes_run)
    except BaseException:
        # one side failed (a dead worker): the other must not outlive the window, or its
        # in-flight requests would be saved into a bundle already sealed
        await cancel_all(lanes_run)
        raise
    whole = LoadResult(
        far.records + near.records,
        max(far.wall_s, near.wall_s),
        stopped_by({far.stopped_by, near.stopped_by}),
        far.cancelled + near.cancelled,
        far.peak_in_flight + near.peak_in_flight,
    )
    return whole, near.records


async def _stop_on_death(run: CapacityRun, clients: LoadClients) -> None:
    """The load clients stop issuing once the engine is found dead (as `stop=run.dead` does
    for golive's own loop)."""
    await run.dead.wait()
    clients.stop(f"the engine terminated ({run.death})")


def _with_probes(run: CapacityRun, probes: ProbeSlots, make: MakeBody) -> tuple[Send, MakeBody]:
    def body(n: int) -> Mapping[str, Any]:
        return probes.body() or make(n)

    async def send(body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
        if probes.owns(body):
            return await probes.send(body, scheduled_ns)
        return await run.send(body, label, scheduled_ns)

    return send, body


CALIBRATION_CAP = 5000  # a runaway bound for the short calibration window only


async def calibrate(run: CapacityRun) -> float:
    """Requests per second per concurrency slot, measured at concurrency 1 for
    `capacity.calibration_s`: every later window's request cap is sized from it."""
    config = run.ctx.config.capacity
    stats, answered = await load_window(
        run, 1, config.calibration_s, config.step_max_requests or CALIBRATION_CAP, 0, "calibrate"
    )
    rate = max(len(answered), 1) / max(stats.wall_s, 1e-3)
    run.idle_silence_s = idle_silence_s([flight(p.record) for p in answered])
    run.ctx.bundle.write_json(
        CAPACITY_CALIBRATION,
        {
            "requests": len(answered),
            "wall_s": stats.wall_s,
            "rate_per_slot": rate,
            "idle_silence_s": round(run.idle_silence_s, 3),
            "stall_after_s": round(stall_after_s(config.stall_s, run.idle_silence_s), 3),
        },
    )
    return rate


def window_cap(run: CapacityRun, concurrency: int, duration_s: float, rate: float) -> int:
    configured = run.ctx.config.capacity.step_max_requests
    return configured or request_cap(rate, concurrency, duration_s, 3.0)


def headroom(run: CapacityRun) -> HeadroomPolicy:
    config = run.ctx.config.capacity
    return HeadroomPolicy(config.client_max_lag_ms, config.client_max_cpu_share)


def drain_s(configured: float | None, duration_s: float) -> float:
    """How long requests in flight may finish after a phase's time is up."""
    return configured if configured is not None else min(120.0, duration_s * 3)


def _window_answers(
    run: CapacityRun, loaded: LoadResult, label: str
) -> tuple[list[RequestRecord], list[ParsedResponse], tuple[int, int]]:
    """Every attempt of the window (the in-process path's retried ones are not in the
    schedule's records), the answers its figures count — each request's last attempt, and
    the retried ones the server failed as a defect does (`retry.judged`), no probe; each was
    parsed as it was saved (here, by a worker, or on arrival from Ray) — and its retries and
    timed-out attempts."""
    retried = run.tally.take(label)
    attempts = list({r.request_id: r for r in [*loaded.records, *retried]}.values())
    parsed = [run.parsed.get(r.request_id) or parse(r) for r in attempts]
    run.parsed.clear()
    counted = [
        p
        for p in parsed
        if not is_probe(p.record) and judged(p.record.label, p.record.status, _kind(p.record))
    ]
    return attempts, counted, attempt_counts(r for r in attempts if not is_probe(r))


def _kind(record: RequestRecord) -> str | None:
    """A record's failure's kind as its saved line has it (what `retry.judged` reads)."""
    failure = record.failure
    return None if failure is None else failure.kind.value
