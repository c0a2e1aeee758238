"""The capacity checks judged from the bundle alone (issue 18): the concurrency ramp from
`metrics/capacity-steps.jsonl`, golive's own headroom from `metrics/capacity-watchdog.jsonl`.
The run calls these on the bundle it is writing; `golive decide` calls them again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_PHASES,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    CAPACITY_WATCHDOG,
    MEMORY_CURVE,
    RESTART,
    TERMINATION,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader, record_streams
from golive.checks.capacity.api_server import api_server_finding, outside_engine_s
from golive.checks.capacity.collect import classified
from golive.checks.capacity.deaths import unshown_deaths
from golive.checks.capacity.failures import failure_detail
from golive.checks.capacity.measured import CEILING, COMPLETED, DURATION_S, ramp_ceiling
from golive.checks.capacity.recorded import (
    answers_of,
    curve_differences,
    orphan_windows,
    repeats_differences,
    steps_differences,
    window_differences,
    window_label,
    window_records,
)
from golive.checks.capacity.rules import (
    Action,
    Classification,
    StabilityPolicy,
    classify_concurrency,
)
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.window_evidence import (
    answers,
    engine_silent_in,
    not_from_records,
    not_the_engines,
    scrapes_edited,
    window_stalls,
)
from golive.checks.capacity.windows import (
    classify_sustained,
    short_window,
    thirds_growth,
    trend,
)
from golive.config import CapacityConfig
from golive.results import CAPACITY_RESULT, CheckResult, Status
from golive.traffic.headroom import headroom_check


def judge_ramp(evidence: BundleReader, config: CapacityConfig) -> CheckResult:
    """`capacity.concurrency` from the bundle: the step rows, once they match the request
    records and the engine's scrapes behind them (`ramp_from_steps` judges them)."""
    rows = evidence.jsonl(CAPACITY_STEPS)
    if not rows and (dead := after_death(evidence, "capacity.concurrency")) is not None:
        return dead
    again = evidence.jsonl(CAPACITY_KNEE_REPEATS)
    records = evidence.records(CAPACITY_CONCURRENCY_REQUESTS)
    mismatch = steps_differences(rows, records, CAPACITY_STEPS)
    mismatch += repeats_differences(again, rows, records, CAPACITY_KNEE_REPEATS)
    labels = [f"c{r.get('concurrency')}" for r in rows] + [str(r.get("label")) for r in again]
    mismatch += orphan_windows(records, labels, CAPACITY_CONCURRENCY_REQUESTS)
    mismatch += unshown_deaths(evidence)
    mismatch += curve_differences([*rows, *again], evidence.text(MEMORY_CURVE), CAPACITY_STEPS)
    mismatch += window_stalls(evidence, [*rows, *again], records, config, CAPACITY_STEPS)
    died = [f"c{r.get('concurrency')}" for r in rows if r.get("engine_died") is True]
    if died and not isinstance(evidence.json(TERMINATION), Mapping):
        # the collector writes the termination record whenever it finds the engine dead
        mismatch.append(
            f"{CAPACITY_STEPS} says the engine died at {', '.join(died)}, but {TERMINATION} "
            "(the death's record) is missing"
        )
    if mismatch:
        return not_from_records("capacity.concurrency", mismatch, CAPACITY_STEPS)
    silent = [
        why
        for row in [*rows, *again]
        if (why := engine_silent_in(evidence, row, records, f"capacity-{window_label(row)}"))
    ]
    if silent:
        return not_the_engines("capacity.concurrency", silent, CAPACITY_STEPS)
    # bundles before 2026-12 saved the sustained window's scrapes under its ramp step's
    # names, over the step's own: those steps' engine figures cannot be read again
    sustained = evidence.json(CAPACITY_SUSTAINED)
    reused = (
        sustained.get("label")
        if isinstance(sustained, Mapping) and not sustained.get("scrapes")
        else None
    )
    edited = [
        found
        for row in [*rows, *again]
        if window_label(row) != reused
        for found in scrapes_edited(evidence, row, f"capacity-{window_label(row)}")
    ]
    if edited:
        return not_from_records("capacity.concurrency", edited, CAPACITY_STEPS)
    quoted, repeated = (
        [
            {**row, "failure_detail": failure_detail(answers(records, window_label(row)))}
            for row in found
        ]
        for found in (rows, again)
    )
    # the termination record names the step the engine died in: that step died, whatever
    # its row says (a dead engine core behind a live API server answers HTTP 500 at once)
    dead = evidence.json(TERMINATION)
    if isinstance(dead, Mapping) and dead.get("phase") == "concurrency":
        quoted = [
            {**row, "engine_died": True}
            if row.get("concurrency") == dead.get("concurrency")
            else row
            for row in quoted
        ]
    return ramp_from_steps(quoted, config, dead is not None, repeated)


def stability_policy(config: CapacityConfig) -> StabilityPolicy:
    """The ramp's stability rules as the config sets them (the collector's and decide's)."""
    return StabilityPolicy(
        max_queue_s=config.max_queue_s,
        max_queue_share=config.max_queue_share,
        required_concurrency=config.required_concurrency,
        max_retry_share=config.max_retry_share,
    )


def ramp_from_steps(
    rows: Sequence[Mapping[str, Any]],
    config: CapacityConfig,
    terminated: bool = False,
    repeated: Sequence[Mapping[str, Any]] = (),
) -> CheckResult:
    """`capacity.concurrency` from the step rows alone (held to their records and scrapes
    by `judge_ramp`): each step's stability, the knee (on its repeated windows, where a
    candidate was measured again) and the ceiling."""
    steps = [StepStats.from_json(row) for row in rows]
    repeats: dict[int, list[StepStats]] = {}
    for row in repeated:
        stats = StepStats.from_json(row)
        repeats.setdefault(stats.concurrency, []).append(stats)
    result = classify_concurrency(steps, stability_policy(config), repeats)
    measurements: dict[str, Any] = {"steps": len(steps), CEILING: result.ceiling}
    for level, runs in sorted(repeats.items()):
        rates = ", ".join(f"{r.throughput_rps:.3f}" for r in runs)
        measurements[f"c{level}_repeat_rps"] = rates
    for s in steps:
        measurements[f"c{s.concurrency}_rps"] = round(s.throughput_rps, 3)
        measurements[f"c{s.concurrency}_e2e_p95_s"] = s.e2e_p95_s
        measurements[f"c{s.concurrency}_queue_mean_s"] = s.queue_mean_s
        measurements[f"c{s.concurrency}_max_waiting"] = s.max_waiting
        measurements[f"c{s.concurrency}_engine_held"] = (
            None if s.engine_held is None else round(s.engine_held, 2)
        )
        outside = outside_engine_s(s)
        measurements[f"c{s.concurrency}_outside_engine_ms"] = (
            None if outside is None else round(outside * 1000, 1)
        )
    frontend = api_server_finding(steps)
    if frontend is not None:
        measurements["api_server_bound"] = frontend
        if "API server bound" not in result.reason:
            result = dataclasses.replace(result, reason=f"{result.reason}; {frontend}")
    evidence_paths = [CAPACITY_CONCURRENCY_REQUESTS, CAPACITY_STEPS, MEMORY_CURVE]
    if terminated:
        evidence_paths.append(TERMINATION)
    return classified("capacity.concurrency", result, measurements, evidence_paths)


def after_death(evidence: BundleReader, check_id: str) -> CheckResult | None:
    """A phase with no evidence of its own, in a run whose engine terminated (the
    termination record): it never ran. `no_data` naming the death, not a failure with a
    cause of its own: the death is judged in the phase where it happened."""
    record = evidence.json(TERMINATION)
    if not isinstance(record, Mapping):
        return None
    unshown = unshown_deaths(evidence)
    if unshown:
        return not_from_records(check_id, unshown, TERMINATION)
    where = f"in the {record.get('phase')} phase at concurrency {record.get('concurrency')}"
    restart = evidence.json(RESTART)
    if isinstance(restart, Mapping) and restart.get("served_again") is not True:
        hint = f"; it did not serve again ({restart.get('failure')}; {RESTART})"
    elif (
        check_id == "capacity.sustained"
        and record.get("phase") == "concurrency"
        and isinstance(record.get("concurrency"), int)
        and record["concurrency"] > 1  # a lower step could have held: a level to sustain
    ):
        hint = (
            "; to measure the ramp's last stable step, bring the engine back within "
            "capacity.restart_wait_s (--restart-wait S), or let golive start it again "
            "(capacity --launch)"
        )
    else:
        hint = ""
    return CAPACITY_RESULT(
        check_id,
        Status.NO_DATA,
        f"not run: the engine terminated earlier, {where} ({record.get('reason')}){hint}",
        evidence=(TERMINATION, *((RESTART,) if isinstance(restart, Mapping) else ())),
    )


def after_no_ceiling(evidence: BundleReader, config: CapacityConfig) -> CheckResult | None:
    """No sustained window after a ramp with no stable step (its lowest failed, stalled, was
    refused or not judged): there is no level to sustain, and load on it proves nothing
    more (the collector does not run it; `phases.sustained`)."""
    ramp = judge_ramp(evidence, config)
    if ramp_ceiling(ramp.measurements) is not None:
        return None
    return CAPACITY_RESULT(
        "capacity.sustained",
        Status.NO_DATA,
        f"not run: the ramp found no stable step to sustain ({ramp.summary[:300]})",
        evidence=(CAPACITY_STEPS,),
    )


def judge_headroom(evidence: BundleReader) -> CheckResult:
    """`golive.client_headroom`: every load window's own figures for golive."""
    return headroom_check(evidence.jsonl(CAPACITY_WATCHDOG))


def judge_sustained(evidence: BundleReader, config: CapacityConfig) -> CheckResult:
    """`capacity.sustained`: the latency trend over the window's answers (each one's send
    time and end-to-end latency, from its record) and the window's own figures."""
    row = evidence.json(CAPACITY_SUSTAINED)
    if not isinstance(row, dict):
        return (
            after_death(evidence, "capacity.sustained")
            or after_no_ceiling(evidence, config)
            or CAPACITY_RESULT(
                "capacity.sustained",
                Status.NO_DATA,
                f"no sustained window in the bundle ({CAPACITY_SUSTAINED} is missing)",
            )
        )
    stats = StepStats.from_json(row)
    label = str(row.get("label"))
    attempts = window_records(evidence.records(CAPACITY_SUSTAINED_REQUESTS), label)
    window = answers_of(attempts)
    mismatch = window_differences(row, attempts, f"{CAPACITY_SUSTAINED} ({label})")
    mismatch += unshown_deaths(evidence)
    mismatch += curve_differences([row], evidence.text(MEMORY_CURVE), CAPACITY_SUSTAINED)
    mismatch += window_stalls(evidence, [row], attempts, config, CAPACITY_SUSTAINED)
    if label != f"c{stats.concurrency}":  # a row golive never writes: its level is its label's
        mismatch.append(
            f"{CAPACITY_SUSTAINED}: concurrency {stats.concurrency!r}, but its label is {label!r}"
        )
    if mismatch:
        return not_from_records("capacity.sustained", mismatch, CAPACITY_SUSTAINED)
    # the window's scrapes (bundles before 2026-12 shared the ramp step's names)
    scrapes = str(row.get("scrapes") or f"capacity-{label}")
    silent = engine_silent_in(evidence, row, window, scrapes)
    if silent:
        return not_the_engines("capacity.sustained", [silent], CAPACITY_SUSTAINED)
    edited = scrapes_edited(evidence, row, scrapes)
    if edited:
        return not_from_records("capacity.sustained", edited, CAPACITY_SUSTAINED)
    t0 = min((r.started_at for r in window), default=0.0)
    done = drift_points(window)
    latency = trend(done)
    thirds = thirds_growth(done)
    # the window's own length (sized from the ramp's rate; older rows: the configured one),
    # never longer than its records span: the tested envelope states the seconds held
    duration = row.get("window_s")
    duration_s = float(duration) if isinstance(duration, int | float) else config.duration_s
    spanned = [r.started_at - t0 + r.attempt_s(r.e2e_s or 0.0) for r in window]
    if spanned:
        duration_s = min(duration_s, round(max(spanned), 1))
    windows = window_throughput(sorted(t for t, _ in done), duration_s)
    level = stats.concurrency
    # a sustained window in a run whose engine died in an earlier phase ran after a restart
    # (restart.py), whatever memory/restart.json says: at the ramp's last stable step
    restarted = _restarted(evidence)
    result = classify_sustained(
        latency,
        windows,
        stats.errors,
        len(window),
        stats.engine_died,
        level,
        refused=stats.refused,
        refused_detail=stats.refused_detail,
        preemptions=stats.preemptions,
        coverage=stats.coverage,
        thirds=thirds,
        stall=stats.stall,
        max_growth=config.max_latency_growth,
        failure_detail=failure_detail(window),
        mean_waiting=stats.mean_waiting,
        max_running=stats.max_running,
        cancelled=stats.cancelled,
        required_concurrency=config.required_concurrency,
        after_restart=restarted,
        retries=(stats.retries, config.max_retry_share),
    )
    result = short_window(result, duration_s, stats.completed, config)
    if result.action is Action.STABLE and not stats.engine_measured:
        result = Classification(
            Action.NO_DATA,
            "the engine's queue gauges and queue-time histogram could not be read under "
            "sustained load, so queue growth cannot be ruled out (is --metrics-url a vLLM "
            "/metrics?)",
        )
    measurements: dict[str, Any] = {
        "concurrency": level,
        DURATION_S: duration_s,
        COMPLETED: stats.completed,
        "errors": stats.errors,
        "throughput_rps": round(stats.throughput_rps, 3),
        "e2e_p50_s": stats.e2e_p50_s,
        "e2e_p95_s": stats.e2e_p95_s,
        "latency_slope_s_per_s": None if latency is None else round(latency.slope, 6),
        "latency_slope_ci_low": None if latency is None else round(latency.low, 6),
        "latency_slope_ci_high": None if latency is None else round(latency.high, 6),
        "latency_growth": None if latency is None else round(latency.relative_growth, 4),
        "latency_growth_thirds": None if thirds is None else round(thirds, 4),
        "max_latency_growth": config.max_latency_growth,
        "preemptions": stats.preemptions,
        "refused_4xx": stats.refused,
        "request_cap": row.get("request_cap"),
        "window_rps": ", ".join(f"{w:.2f}" for w in windows),
    }
    evidence_paths = [CAPACITY_SUSTAINED_REQUESTS, CAPACITY_SUSTAINED, MEMORY_CURVE]
    if restarted:  # the engine died earlier and served again (restart.py): said, never hidden
        record = RESTART if isinstance(evidence.json(RESTART), Mapping) else TERMINATION
        result = dataclasses.replace(
            result, reason=f"{result.reason} (measured after the engine's restart: {record})"
        )
        measurements["after_restart"] = True
        evidence_paths.append(record)
    return classified("capacity.sustained", result, measurements, evidence_paths)


def drift_points(window: Sequence[RequestRecordLine]) -> list[tuple[float, float]]:
    """The sustained window's answers as the drift fit reads them: each on the time axis where
    its attempt ended (from the window's first send), with its latency from the intended
    send (a retried one's spans its earlier attempts, which ended before it was sent)."""
    t0 = min((r.started_at for r in window), default=0.0)
    return [
        (r.started_at + r.attempt_s(e2e) - t0, e2e)
        for r in window
        if r.answered and (e2e := r.e2e_s) is not None
    ]


def _restarted(evidence: BundleReader) -> bool:
    """Whether the sustained window ran after the engine died earlier and served again
    (restart.py): any of the records a restart leaves says so, so deleting one does not
    hide it."""
    dead = evidence.json(TERMINATION)
    if isinstance(dead, Mapping) and dead.get("phase") in ("long_input", "concurrency"):
        return True
    restart = evidence.json(RESTART)
    if isinstance(restart, Mapping) and restart.get("served_again") is True:
        return True
    phases = evidence.json(CAPACITY_PHASES)
    if isinstance(phases, list) and any(
        isinstance(p, Mapping) and p.get("phase") == "restart" for p in phases
    ):
        return True
    return bool(record_streams(evidence.root, "capacity-restart"))


def window_throughput(done_at: Sequence[float], duration_s: float, windows: int = 6) -> list[float]:
    if not done_at:
        return []
    width = max(duration_s, *done_at) / windows
    counts = [0] * windows
    for t in done_at:
        counts[min(windows - 1, int(t / width))] += 1
    return [c / width for c in counts]
