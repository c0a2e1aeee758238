"""The report's figures over time: host memory, KV cache usage and the engine's queue over
the pressure phases (`memory/capacity.csv`); each engine GPU's memory with the headroom line
(`capacity.min_memory_headroom` of the GPU's memory, `memory/gpus.json`); and every answer's
end-to-end latency over the sustained window with the drift fit capacity.sustained judges
(`windows.trend` over the points `judge.judge_sustained` builds, built the same way here)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

from golive.bundle.layout import (
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    GPU_DEVICES,
    MEMORY_CURVE,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import drift_points
from golive.checks.capacity.memory import headroom_floor
from golive.checks.capacity.memory_curve import SavedCurve, curve_number, read_curve
from golive.checks.capacity.recorded import answers_of, window_label, window_records
from golive.checks.capacity.windows import trend
from golive.config import CapacityConfig
from golive.report.figures import Figure, LoadWindows
from golive.report.plots import Ref, line_chart
from golive.report.plots_latency import Drift, drift_chart
from golive.verdict.document import VerdictDocument

TIME_AXIS = "seconds since the pressure phases began"
QUEUE = ("num_requests_running", "num_requests_waiting")
_DEFAULT_HEADROOM = CapacityConfig().min_memory_headroom  # where the verdict states none


def _columns(curve: SavedCurve, names: list[str], x: list[float]) -> dict[str, list[float | None]]:
    """Each column's value at every time in `x` (None where that row had none)."""
    out: dict[str, list[float | None]] = {}
    for name in names:
        at = dict(curve.columns.get(name, ()))
        out[name] = [at.get(t) for t in x]
    return out


def memory_figures(reader: BundleReader, verdict: VerdictDocument) -> list[Figure]:
    """Host memory, KV cache usage, the queue and each engine GPU's memory over the phases."""
    text = reader.text(MEMORY_CURVE)
    if not text:
        return []
    curve = read_curve(text)
    rows = _rows(text)
    x = [t for t, _ in rows]
    phases = [p for _, p in rows]
    columns = list(curve.columns)
    host = [c for c in columns if not c.startswith("gpu") and c.endswith(("_mib", "_mb"))]
    kv = [c for c in columns if "kv_cache" in c]
    queue = [c for c in columns if c in QUEUE]
    figures = [
        Figure(
            "host-memory",
            line_chart(
                "Host memory by phase", (TIME_AXIS, "MiB"), x, _columns(curve, host, x), phases
            ),
            "What to look for: the serving process's resident memory should level off after "
            "each phase starts; a steady climb within one phase is a leak.",
        ),
        Figure(
            "kv-cache",
            line_chart(
                "KV cache usage by phase",
                (TIME_AXIS, "share of the KV cache used (0 to 1)"),
                x,
                _columns(curve, kv, x),
                phases,
            ),
            "What to look for: near 1 the cache is full and new requests queue or are "
            "preempted; under sustained load it should hold a level, not climb.",
        ),
        Figure(
            "queue",
            line_chart(
                "Running and waiting requests by phase",
                (TIME_AXIS, "requests"),
                x,
                _columns(curve, queue, x),
                phases,
            ),
            "What to look for: waiting above zero means the engine could not schedule every "
            "request sent; running should follow the phase's concurrency.",
        ),
        *_gpu_figures(reader, verdict, curve, x, phases),
    ]
    return [f for f in figures if f.svg]


def _rows(text: str) -> list[tuple[float, str]]:
    """Each curve row's time and phase, in order."""
    out = []
    for row in csv.DictReader(io.StringIO(text)):
        t = curve_number(row.get("t_s"))
        if t is not None:
            out.append((t, str(row.get("phase") or "")))
    return out


def _gpu_figures(
    reader: BundleReader,
    verdict: VerdictDocument,
    curve: SavedCurve,
    x: list[float],
    phases: list[str],
) -> list[Figure]:
    """Each GPU's memory against its headroom line (`gpu<i>_used_mib`, memory/gpus.json)."""
    inventory = reader.json(GPU_DEVICES)
    totals = {
        g["index"]: float(g["memory_total_mib"])
        for g in (inventory if isinstance(inventory, list) else ())
        if isinstance(g, Mapping) and isinstance(g.get("memory_total_mib"), int | float)
    }
    minimum = headroom_floor(verdict.measurements("capacity.memory"))
    share = _DEFAULT_HEADROOM if minimum is None else float(minimum)
    out = []
    for index, total in sorted(totals.items()):
        column = f"gpu{index}_used_mib"
        if column not in curve.columns:
            continue
        refs = [
            Ref(total, f"GPU{index} memory {total:,.0f} MiB"),
            Ref(total * (1 - share), f"headroom line: {share:.0%} of it spare"),
        ]
        out.append(
            Figure(
                f"gpu{index}-memory",
                line_chart(
                    f"GPU{index} memory by phase",
                    (TIME_AXIS, "MiB used (NVML)"),
                    x,
                    _columns(curve, [column], x),
                    phases,
                    refs,
                ),
                "What to look for: vLLM reserves its KV cache at start, so the line sits high "
                "from the start; capacity.memory judges what the load needed (this less the "
                "part of the cache never used) against the headroom line, and flags a climb "
                "under sustained load.",
            )
        )
    return out


def sustained_points(reader: BundleReader) -> list[tuple[float, float]]:
    """(completion time from the window's first send, e2e seconds) of each answer of the
    sustained window, built as `judge_sustained` builds the points it fits."""
    row = reader.json(CAPACITY_SUSTAINED)
    if not isinstance(row, Mapping):
        return []
    records = window_records(reader.records(CAPACITY_SUSTAINED_REQUESTS), window_label(row))
    return drift_points(answers_of(records))


def sustained_figures(reader: BundleReader, windows: LoadWindows) -> list[Figure]:
    """Every answer's latency over the sustained window with the fitted drift."""
    points = sustained_points(reader)
    fit = trend(points)
    drift = None if fit is None else Drift(fit.slope, fit.low, fit.high)
    target = windows.slo.e2e_p95_ms
    refs = [] if target is None else [Ref(target / 1000, f"SLO: e2e p95 ≤ {target / 1000:g} s")]
    svg = drift_chart(
        "End-to-end latency over the sustained window",
        ("seconds since the window's first request (when each answer ended)", "seconds"),
        points,
        drift,
        refs,
    )
    caption = (
        "What to look for: a band (the slope's 95% interval) wholly above a flat line means "
        "latency grew while the load stayed the same: pressure accumulating (capacity.sustained "
        "also compares the last third's median with the first's). A band around zero means "
        "the load was held."
    )
    return [Figure("sustained-latency", svg, caption)] if svg else []
