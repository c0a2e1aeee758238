"""The HTML report's numeric table, one row per load window: report.md's per-step figures
(requests, e2e p50, e2e and TTFT p95 with their 95% upper bounds and sample counts, from the
window's summary row) beside the latency set from its records (TTFT and ITL p50/p95/p99,
output tokens/s, goodput where an SLO is stated)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from golive.bundle.layout import CAPACITY_KNEE_REPEATS, CAPACITY_STEPS, CAPACITY_SUSTAINED
from golive.bundle.store import BundleReader
from golive.checks.capacity.recorded import window_label
from golive.quantiles import samples_needed
from golive.report.figures import LoadWindows, finite_rows, window_name

HEADERS = (
    "window",
    "concurrency",
    "requests",
    "e2e p50 s",
    "e2e p95 s (bound)",
    "TTFT p95 s (bound)",
    "TTFT p50 / p95 / p99 ms",
    "ITL p50 / p95 / p99 ms",
    "output tokens/s",
    "goodput requests/s",
)


def summaries(reader: BundleReader) -> dict[tuple[str, str], dict[str, Any]]:
    """Each window's summary row by (phase, label), as the latency rows name them."""
    out = {
        ("concurrency", window_label(row)): row
        for source in (CAPACITY_STEPS, CAPACITY_KNEE_REPEATS)
        for row in finite_rows(reader.jsonl(source))
    }
    sustained = reader.json(CAPACITY_SUSTAINED)
    if isinstance(sustained, dict):
        out[("sustained", window_label(sustained))] = finite_rows([sustained])[0]
    return out


def _seconds(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "n/a"


def _bounded(row: Mapping[str, Any], key: str) -> str:
    """A p95 with its upper bound, or marked as no bound (too few samples)."""
    value = row.get(f"{key}_p95_s")
    if not isinstance(value, int | float):
        return "n/a"
    samples = row.get(f"{key}_samples")
    if samples is None:
        return f"{value:.3f} (samples not recorded)"
    bound = row.get(f"{key}_p95_upper_s")
    if isinstance(bound, int | float):
        return f"{value:.3f} (≤ {bound:.3f}, n={samples})"
    return f"{value:.3f} (n={samples} < {samples_needed(95)}: not a bound)"


def _spread(row: Mapping[str, Any], metric: str) -> str:
    keys = (f"median_{metric}_ms", f"p95_{metric}_ms", f"p99_{metric}_ms")
    values = [row.get(k) for k in keys]
    if all(v is None for v in values):
        return "n/a"
    return " / ".join("n/a" if v is None else f"{v:,.0f}" for v in values)


def _rate(value: Any) -> str:
    return f"{value:,.2f}" if isinstance(value, int | float) else "n/a"


def step_rows(reader: BundleReader, windows: LoadWindows) -> list[tuple[str, ...]]:
    """One row of cells per load window, in the order the windows ran."""
    summary = summaries(reader)
    rows: list[tuple[str, ...]] = []
    for latency in windows.latency:
        step = summary.get((str(latency.get("phase")), str(latency.get("label"))), {})
        goodput = latency.get("request_goodput")
        rows.append(
            (
                window_name(latency),
                str(latency.get("concurrency")),
                str(step.get("completed", latency.get("completed"))),
                _seconds(step.get("e2e_p50_s")),
                _bounded(step, "e2e"),
                _bounded(step, "ttft"),
                _spread(latency, "ttft"),
                _spread(latency, "itl"),
                _rate(latency.get("output_throughput")),
                "no SLO stated" if goodput is None and not windows.slo.stated else _rate(goodput),
            )
        )
    return rows
