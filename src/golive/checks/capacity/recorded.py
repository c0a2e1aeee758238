"""The pressure phases' summaries held to the records and scrapes behind them (issue 27).

`capacity-steps.jsonl`, the sustained window's row and the long-input ladder are what the
capacity judges read; they are a cache of what the records say. Each is recomputed here from
`requests/capacity-*.jsonl` (status, failure, protocol problems, latency from the intended
send): a summary that does not match its records was not produced from them, so the check
judged from it cannot stand. And the engine's own metrics must move with the load: a window
whose served model's counters did not count what was answered, or whose running gauge stayed
0, measured another engine or a frozen exporter. Pure: rows, record lines and scrape text in,
the differences out.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from golive.bundle.request_line import RequestRecordLine
from golive.checks.capacity.failures import cancelled, server_errors
from golive.checks.capacity.memory_curve import curve_number
from golive.metrics import MetricsDelta, Snapshot, vllm_snapshot
from golive.quantiles import quantile
from golive.traffic.retry import judged, retry_counts, window_of

GAUGE_FIELDS = ("max_running", "mean_waiting", "max_waiting", "engine_held")  # sampled /metrics

# Latency percentiles are recomputed from millisecond figures saved to the microsecond.
TOLERANCE_S = 0.002


def window_records(records: Iterable[RequestRecordLine], label: str) -> list[RequestRecordLine]:
    """A window's workload records: its label, on any client (`c4@worker-1`), with the
    attempts its client retried (`c4~retried1`), no probes."""
    return [r for r in records if window_of(r.label) == label]


def by_window(records: Iterable[RequestRecordLine]) -> dict[str, list[RequestRecordLine]]:
    """Every window's records (`window_records` of each label), in one pass: a judge that
    reads each row's window looks it up here instead of reading all the records again."""
    out: dict[str, list[RequestRecordLine]] = {}
    for r in records:
        out.setdefault(window_of(r.label), []).append(r)
    return out


def answers_of(attempts: Iterable[RequestRecordLine]) -> list[RequestRecordLine]:
    """The attempts a window's figures count (`retry.judged`): each request's last, and the
    retried ones the server failed as a defect does."""
    return [r for r in attempts if judged(r.label, r.http_status, r.failure_kind)]


def window_differences(
    row: Mapping[str, Any], attempts: Sequence[RequestRecordLine], where: str
) -> list[str]:
    """How one window's summary row differs from its records (empty: it matches). A row
    written since retries are counted always has `retries`; one without it beside retried
    attempts was edited."""
    records = answers_of(attempts)
    answered = [r for r in records if r.answered]
    retries, timeouts = retry_counts(attempts)
    counted = {
        "completed": len(answered),
        "errors": len(records) - len(answered),
        "refused": sum(1 for r in records if _refused(r.http_status)),
        "server_errors": server_errors(records),
        "cancelled": cancelled(records),
        "retries": retries,
        "timeouts": timeouts,
    }
    out = [
        f"{where}: {key} {row.get(key)!r}, but its {len(records)} request records say {value}"
        for key, value in counted.items()
        if (key in row or (key == "retries" and value)) and row.get(key) != value
    ]
    e2e = [v for r in answered if (v := r.e2e_s) is not None]
    p95 = quantile([v * 1000 for v in e2e], 95).value
    saved = row.get("e2e_p95_s")
    if isinstance(saved, (int, float)) and not isinstance(saved, bool):
        if p95 is None or abs(p95 / 1000 - float(saved)) > TOLERANCE_S:
            again = "none" if p95 is None else f"{p95 / 1000:.4f} s"
            out.append(f"{where}: e2e_p95_s {saved!r}, but its request records say {again}")
    elif saved is None and p95 is not None and "e2e_p95_s" in row:
        out.append(f"{where}: e2e_p95_s None, but its request records say {p95 / 1000:.4f} s")
    return out


def steps_differences(
    rows: Sequence[Mapping[str, Any]], records: Sequence[RequestRecordLine], source: str
) -> list[str]:
    """Each ramp step (`c<N>`) against its records; the ramp runs each level once (a second
    row of one level would count its records twice)."""
    out: list[str] = []
    seen: set[str] = set()
    windows = by_window(records)
    for number, row in enumerate(rows, start=1):
        label = f"c{row.get('concurrency')}"
        where = f"{source} line {number} ({label})"
        if label in seen:
            out.append(f"{where}: a second row of {label}; the ramp runs each level once")
        seen.add(label)
        out += window_differences(row, windows.get(label, []), where)
    return out


def window_label(row: Mapping[str, Any]) -> str:
    """A ramp window's label: `c<N>`, or `c<N>r<k>` for a knee repeat."""
    return str(row.get("label") or f"c{row.get('concurrency')}")


def repeats_differences(
    rows: Sequence[Mapping[str, Any]],
    steps: Sequence[Mapping[str, Any]],
    records: Sequence[RequestRecordLine],
    source: str,
) -> list[str]:
    """Each knee repeat (`c<N>r<k>`) against its records; its label must name its level and a
    level the ramp ran (a row golive never writes is not judged)."""
    levels = {step.get("concurrency") for step in steps}
    out: list[str] = []
    seen: set[str] = set()
    windows = by_window(records)
    for number, row in enumerate(rows, start=1):
        label = str(row.get("label"))
        where = f"{source} line {number} ({label})"
        level = row.get("concurrency")
        if not label.startswith(f"c{level}r") or not label[len(f"c{level}r") :].isdigit():
            out.append(f"{where}: concurrency {level!r}, but its label is {label!r}")
        elif level not in levels or label in seen:
            out.append(f"{where}: not a repeat of a step the ramp ran, or a second {label}")
        seen.add(label)
        out += window_differences(row, windows.get(label, []), where)
    return out


def orphan_windows(
    records: Sequence[RequestRecordLine], labels: Iterable[str], source: str
) -> list[str]:
    """Records of ramp windows no row states (their rows deleted, with whatever they showed):
    every window the ramp ran writes its row, the calibration window its own record."""
    known = {*labels, "calibrate"}
    orphans = sorted({window_of(r.label) for r in records} - known)
    if not orphans:
        return []
    return [f"{source}: records of window(s) {', '.join(orphans[:5])} that no row states"]


def ladder_differences(
    steps: Sequence[Mapping[str, Any]], records: Sequence[RequestRecordLine], source: str
) -> list[str]:
    """Each long-input step (`long-<tokens>`): served exactly when its record was answered."""
    out: list[str] = []
    windows = by_window(records)
    for row in steps:
        label = f"long-{row.get('context_tokens')}"
        mine = windows.get(label, [])
        if not mine:
            if row.get("outcome") == "accepted":
                out.append(f"{source} step {label}: accepted, but it has no request record")
            continue
        served = any(r.answered for r in mine)
        if served != (row.get("outcome") == "accepted"):
            said = "served" if served else "not served"
            out.append(f"{source} step {label}: {row.get('outcome')}, but its record was {said}")
    return out


def _refused(status: int | None) -> bool:
    return status is not None and 400 <= status < 500


def engine_silent(
    row: Mapping[str, Any],
    records: Sequence[RequestRecordLine],
    before_text: str | None,
    after_text: str | None,
    where: str,
    engine_name: Callable[[str | None], str | None] | None = None,
) -> str | None:
    """Why a window's engine metrics cannot be its engine's (None: they moved with it): the
    served model's finished-request counter must grow by at least what golive saw completed,
    must never go down (a restart). The running gauge is not held to it: it is sampled, and
    short requests can fall between samples (a starved client on 2 cores saw 0 while 2
    requests were answered). `engine_name`: the model asked, as the engine behind a gateway
    labels its series."""
    completed = row.get("completed")
    if not isinstance(completed, int) or completed == 0:
        return None
    before, after = vllm_snapshot(before_text), vllm_snapshot(after_text)
    if before is None or after is None:
        return None  # no scrape: the row's engine figures are already unmeasured
    asked = next((m for r in records if isinstance(m := _asked(r), str)), None)
    model = asked if engine_name is None else engine_name(asked)
    match = {"model_name": model} if model and _labelled(after, "request_success") else {}
    start = before.value("request_success", "sum", **match)
    end = after.value("request_success", "sum", **match)
    if end is None:
        return f"{where}: the metrics have no finished-request counter for {model or 'it'}"
    if start is not None and end < start:
        return (
            f"{where}: the finished-request counter went down ({start:g} -> {end:g}): "
            "the engine restarted"
        )
    grew = end - (start or 0.0)
    if grew < completed:
        return (
            f"{where}: {completed} requests completed, but the engine's finished-request "
            f"counter grew by {grew:g}"
        )
    return _tokens_beyond_engine(records, before, after, match, where)


def _tokens_beyond_engine(
    records: Sequence[RequestRecordLine],
    before: Snapshot,
    after: Snapshot,
    match: Mapping[str, str],
    where: str,
) -> str | None:
    """The answers' own token counts (`usage.completion_tokens`, what TPOT and the decode
    speed are read from) may not exceed what the engine counted it generated in the window
    (1% and 8 tokens of slack for counting at the window's edges)."""
    claimed = 0
    for record in records:
        response = record.response
        usage = response.get("usage") if isinstance(response, Mapping) else None
        tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
        if record.answered and isinstance(tokens, int) and not isinstance(tokens, bool):
            claimed += tokens
    start = before.value(GENERATED, "sum", **match)
    end = after.value(GENERATED, "sum", **match)
    if not claimed or end is None:
        return None
    generated = end - (start or 0.0)
    if claimed > generated * 1.01 + 8:
        return (
            f"{where}: the answers say they were {claimed} tokens long, but the engine's "
            f"generation-token counter grew by {generated:g}"
        )
    return None


GENERATED = "generation_tokens"


PREEMPTIONS = "num_preemptions"


def scraped_differences(
    row: Mapping[str, Any], before_text: str | None, after_text: str | None, where: str
) -> list[str]:
    """The window's engine figures read from its two saved scrapes, as the collector read
    them: preemptions (the counter's increase) and the mean queue time (the histogram's);
    a row that states other values was not made from these scrapes."""
    before, after = vllm_snapshot(before_text), vllm_snapshot(after_text)
    if before is None or after is None:  # the collector had none either: the row says None
        # (nor did its gauge samples, read from the same /metrics: a row stating either
        # beside missing scrapes lost them after the run) — unless the engine died in the
        # window, where a gauge sample can land just before the scrape that found it gone;
        # the gauges are held to their curve rows either way (`curve_differences`)
        died = row.get("engine_died") is True
        fields = ("preemptions", "queue_mean_s", *(() if died else GAUGE_FIELDS))
        stated = [k for k in fields if row.get(k) is not None]
        return (
            [
                f"{where}: the row states {', '.join(stated)}, but its two scrapes "
                f"(metrics/capacity-{where}-before/after.prom) are missing or cannot be read"
            ]
            if stated
            else []
        )
    gone = [n for n, s in (("before", before), ("after", after)) if not s.series(PREEMPTIONS)]
    if gone:  # every vLLM exports it: a window whose preemptions cannot be read is unshown
        return [
            f"{where}: its {' and '.join(gone)} scrape carries no vllm:{PREEMPTIONS}_total, "
            "which every vLLM /metrics has: the window's preemptions cannot be read again"
        ]
    delta = MetricsDelta(before, after)
    queue = delta.histogram("request_queue_time_seconds")
    again = {
        "preemptions": delta.counter(PREEMPTIONS),
        "queue_mean_s": None if queue is None else queue.mean,
    }
    out = []
    for key, value in again.items():
        if key not in row:
            continue
        saved = row.get(key)
        same = (
            saved is None and value is None
            if saved is None or value is None
            else isinstance(saved, int | float) and abs(float(saved) - value) <= 1e-6
        )
        if not same:
            out.append(f"{where}: {key} {saved!r}, but its scrapes say {value!r}")
    return out


def _asked(record: RequestRecordLine) -> object:
    request = record.request
    return request.get("model") if isinstance(request, Mapping) else None


def _labelled(snapshot: Snapshot, name: str) -> bool:
    return any(s.label("model_name") for s in snapshot.series(name))


def curve_differences(
    rows: Sequence[Mapping[str, Any]], curve_text: str | None, source: str
) -> list[str]:
    """Each window's gauge figures read again from the curve's rows it names (`curve_rows`),
    as the collector read them (`gauge_figures`); a curve that is gone is named first
    (`curve_gone`); a window stating gauges without naming its rows, beside windows that do,
    lost them after the run."""
    gone = curve_gone(rows, curve_text, source)
    if gone:
        return gone
    samples = list(csv.DictReader(io.StringIO(curve_text or "")))
    out = []
    for row in rows:
        where = f"{source} ({window_label(row)})"
        span = row.get("curve_rows")
        if span is None:
            if any(row.get(k) is not None for k in GAUGE_FIELDS):
                out.append(f"{where}: states the engine's gauges but names no curve rows")
            continue
        if not (isinstance(span, list) and len(span) == 2 and all(type(i) is int for i in span)):
            out.append(f"{where}: curve_rows {span!r} is not two row numbers")
            continue
        first, last = span
        if not 0 <= first <= last <= len(samples):
            out.append(
                f"{where}: names curve rows {first}..{last}, but memory/capacity.csv holds "
                f"{len(samples)}"
            )
            continue
        again = gauge_figures(samples[first:last])
        for key, value in again.items():
            saved = row.get(key)
            same = (
                saved is None and value is None
                if saved is None or value is None
                else isinstance(saved, int | float) and math.isclose(saved, value, abs_tol=1e-9)
            )
            if not same:
                out.append(f"{where}: {key} {saved!r}, but its curve rows say {value!r}")
    return out


def gauge_figures(samples: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """A window's gauge figures from its curve rows: the sampler's rows as the collector holds
    them (numbers) or as the bundle keeps them (CSV text) — one computation for both."""
    running = [curve_number(r.get("num_requests_running")) for r in samples]
    waiting = [curve_number(r.get("num_requests_waiting")) for r in samples]
    held = [
        run + (wait or 0.0) for run, wait in zip(running, waiting, strict=True) if run is not None
    ]
    present_running = [v for v in running if v is not None]
    present_waiting = [v for v in waiting if v is not None]
    return {
        "max_waiting": max(present_waiting) if present_waiting else None,
        "max_running": max(present_running) if present_running else None,
        "mean_waiting": sum(present_waiting) / len(present_waiting) if present_waiting else None,
        "engine_held": sum(held) / len(held) if held else None,
    }


def curve_gone(rows: Sequence[Mapping[str, Any]], curve_text: str | None, source: str) -> list[str]:
    """Windows whose rows state the engine's sampled gauges (running, waiting) need the curve
    they were sampled into (`memory/capacity.csv`, with its running-requests column): without
    it nothing in the bundle stands behind those figures."""
    stated = [window_label(r) for r in rows if any(r.get(k) is not None for k in GAUGE_FIELDS)]
    if not stated:
        return []
    header = (curve_text or "").partition("\n")[0].split(",")
    if "num_requests_running" in header:
        return []
    return [
        f"{source} states the engine's gauges for {', '.join(stated[:4])}, but the curve they "
        "were sampled into (memory/capacity.csv) is missing or has no num_requests_running"
    ]
