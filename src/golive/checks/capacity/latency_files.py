"""`metrics/latency.json` and `metrics/latency.csv`: the standard latency set of every load
window of the capacity phases (the ramp's steps, the knee's repeats, the sustained window),
computed from the bundle's request records once the phases ended (`latency_set`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_LATENCY,
    CAPACITY_LATENCY_CSV,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import Bundle, BundleReader
from golive.checks.capacity.latency_set import window_latency
from golive.checks.capacity.recorded import by_window, window_label, window_records
from golive.slo_config import SloConfig


def latency_rows(evidence: BundleReader, slo: SloConfig) -> list[dict[str, Any]]:
    """One row per load window, in the order the windows ran within each phase."""
    out: list[dict[str, Any]] = []
    ramp = by_window(evidence.records(CAPACITY_CONCURRENCY_REQUESTS))
    for source in (CAPACITY_STEPS, CAPACITY_KNEE_REPEATS):
        for row in evidence.jsonl(source):
            out.append(_row("concurrency", row, ramp.get(window_label(row), []), slo))
    sustained = evidence.json(CAPACITY_SUSTAINED)
    if isinstance(sustained, Mapping):
        label = window_label(sustained)
        records = window_records(evidence.records(CAPACITY_SUSTAINED_REQUESTS), label)
        out.append(_row("sustained", sustained, records, slo))
    return out


def _row(
    phase: str, row: Mapping[str, Any], records: list[RequestRecordLine], slo: SloConfig
) -> dict[str, Any]:
    level = row.get("concurrency")
    concurrency = level if isinstance(level, int) and not isinstance(level, bool) else None
    figures = window_latency(window_label(row), concurrency, records, slo).to_json()
    return {"phase": phase, **figures}


def latency_csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def save_latency_set(bundle: Bundle, slo: SloConfig) -> list[dict[str, Any]]:
    """Write both files from the records the bundle holds now; the rows written."""
    rows = latency_rows(BundleReader(bundle.root), slo)
    if rows:
        bundle.write_json(CAPACITY_LATENCY, rows)
        bundle.write_text(CAPACITY_LATENCY_CSV, latency_csv(rows))
    return rows
