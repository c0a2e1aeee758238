"""A load window's summary held to the bundle's own evidence behind it, for the capacity
judges (`judge.py`): its stall found again in its records, its engine metrics moving with
the load and read under the engine's name, its scrapes as the row says. Each reads the
bundle (`BundleReader`); the rules themselves are pure (`recorded.py`, `stalls.py`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from golive.bundle.layout import (
    CAPACITY_CALIBRATION,
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_SUSTAINED_REQUESTS,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.checks.capacity.recorded import (
    answers_of,
    by_window,
    engine_silent,
    scraped_differences,
    window_label,
    window_records,
)
from golive.checks.capacity.stall_evidence import (
    calibrated_stall_s,
    shape_differences,
    stall_differences,
)
from golive.checks.engine_name import engine_model
from golive.config import CapacityConfig
from golive.results import CAPACITY_RESULT, CheckResult, Status

# a phase judged from nothing of its rows, and why (capacity.slo reads no saturation there)
RECORD_MISMATCHES = "record_mismatches"  # its summary file contradicts its records
SILENT_WINDOWS = "silent_windows"  # its engine figures are not the engine's


def rows_contradicted(measurements: Mapping[str, object]) -> bool:
    """A phase whose summary its records contradict, or whose engine figures are not the
    engine's (`not_from_records`, `not_the_engines`)."""
    return RECORD_MISMATCHES in measurements or SILENT_WINDOWS in measurements


def not_from_records(check_id: str, mismatch: Sequence[str], source: str) -> CheckResult:
    """A summary that its request records contradict: the check cannot be judged from it."""
    more = f" (and {len(mismatch) - 3} more)" if len(mismatch) > 3 else ""
    return CAPACITY_RESULT(
        check_id,
        Status.NO_DATA,
        f"{source} does not match the request records behind it: {'; '.join(mismatch[:3])}{more}",
        {RECORD_MISMATCHES: len(mismatch)},
        evidence=(source,),
    )


def window_stalls(
    evidence: BundleReader,
    rows: Sequence[Mapping[str, Any]],
    records: Sequence[RequestRecordLine],
    config: CapacityConfig,
    source: str,
) -> list[str]:
    """Each window's stall, or none, found again in its records (`stall_differences`) at
    the silence the calibration window set."""
    calibration = answers_of(
        line
        for stream in (CAPACITY_CONCURRENCY_REQUESTS, CAPACITY_SUSTAINED_REQUESTS)
        for line in window_records(evidence.records(stream), "calibrate")
    )
    saved = evidence.json(CAPACITY_CALIBRATION)
    ran = saved.get("wall_s") if isinstance(saved, Mapping) else None
    # the calibration runs at concurrency 1: its records are held like a window's
    out = shape_differences(calibration, 1, ran, f"{CAPACITY_CALIBRATION} (calibrate)")
    after = calibrated_stall_s(calibration, config.stall_s)
    said = saved.get("stall_after_s") if isinstance(saved, Mapping) else None
    if isinstance(said, int | float) and abs(said - round(after, 3)) > 0.0015:
        out.append(
            f"{CAPACITY_CALIBRATION}: stall_after_s {said!r}, but the calibration's records "
            f"say {after:.3f} s"
        )
    windows = by_window(records)
    return out + [
        found
        for row in rows
        for found in stall_differences(
            row,
            windows.get(window_label(row), []),
            after,
            f"{source} ({window_label(row)})",
        )
    ]


def engine_silent_in(
    evidence: BundleReader,
    row: Mapping[str, Any],
    records: Sequence[RequestRecordLine],
    scrapes: str,
) -> str | None:
    where = f"{scrapes.removeprefix('capacity-')}"
    before = evidence.text(f"metrics/{scrapes}-before.prom")
    after = evidence.text(f"metrics/{scrapes}-after.prom")
    return engine_silent(
        row,
        answers(records, window_label(row)),
        before,
        after,
        where,
        functools.partial(engine_model, evidence),
    )


def answers(records: Sequence[RequestRecordLine], label: str) -> list[RequestRecordLine]:
    """A window's requests as the user saw them (each one's last attempt)."""
    return answers_of(window_records(records, label))


def scrapes_edited(evidence: BundleReader, row: Mapping[str, Any], scrapes: str) -> list[str]:
    return scraped_differences(
        row,
        evidence.text(f"metrics/{scrapes}-before.prom"),
        evidence.text(f"metrics/{scrapes}-after.prom"),
        scrapes.removeprefix("capacity-"),
    )


def not_the_engines(check_id: str, silent: Sequence[str], source: str) -> CheckResult:
    """Engine metrics that did not move with the load: the window's engine figures are not
    the engine's, so nothing is judged from them."""
    return CAPACITY_RESULT(
        check_id,
        Status.NO_DATA,
        f"metrics frozen or from another engine: {'; '.join(silent[:3])}; the engine's "
        f"figures in {source} are not judged (is --metrics-url this deployment's /metrics?)",
        {SILENT_WINDOWS: len(silent)},
        evidence=(source,),
    )
