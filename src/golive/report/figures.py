"""The report's figures by load window, gathered from the bundle: latency, throughput, output
tokens/s and queueing by the ramp's concurrency with the knee (capacity.concurrency's
`ceiling`) and the SLO lines (config/effective.yaml `slo:`, capacity.slo's `slo_ceiling`)
marked; the TTFT and ITL distributions of every window (`latency_files.latency_rows`, from the
request records); and the per-step table (report.md's figures and the latency set's)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from golive.bundle.layout import CAPACITY_STEPS, EFFECTIVE_CONFIG
from golive.bundle.store import BundleReader
from golive.checks.capacity.latency_files import latency_rows
from golive.checks.capacity.measured import ramp_ceiling
from golive.checks.capacity.recorded import window_label
from golive.checks.capacity.slo import slo_ceiling
from golive.report.plots import Mark, Ref, category_chart
from golive.report.plots_latency import percentile_chart
from golive.slo_config import SloConfig
from golive.verdict.document import VerdictDocument

CONCURRENCY_AXIS = "concurrency (requests in flight, each tested step)"


@dataclass(frozen=True, slots=True)
class Figure:
    """One chart and the caption that says what to read from it."""

    key: str
    svg: str
    caption: str


@dataclass(frozen=True, slots=True)
class LoadWindows:
    """What the figures by window read: the ramp's steps, every window's latency set, the
    SLOs stated and the ceilings the verdict found."""

    steps: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    slo: SloConfig
    ceiling: int | None
    slo_ceiling: int | None

    @classmethod
    def read(cls, reader: BundleReader, verdict: VerdictDocument) -> LoadWindows:
        slo = stated_slo(reader)
        return cls(
            finite_rows(reader.jsonl(CAPACITY_STEPS)),
            finite_rows(latency_rows(reader, slo)),
            slo,
            ramp_ceiling(verdict.measurements("capacity.concurrency")),
            slo_ceiling(verdict.measurements("capacity.slo")),
        )

    def step_marks(self, concurrency: Sequence[object]) -> list[Mark]:
        """The knee and the SLO ceiling at the first category of their level."""
        out = []
        named = (
            (self.ceiling, "knee (capacity.concurrency ceiling)"),
            (self.slo_ceiling, "SLO ceiling (capacity.slo)"),
        )
        for level, name in named:
            if level is not None and level in concurrency:
                out.append(Mark(concurrency.index(level), f"{name}: {level}"))
        return out


def finite_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every figure that is not a finite number (NaN, Infinity: JSON as Python
    writes it) as None: not measured, never drawn, never a crash."""
    return [
        {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
        for row in rows
    ]


def stated_slo(reader: BundleReader) -> SloConfig:
    """The `slo:` section of the bundle's saved config; none stated where it has none."""
    try:
        saved = yaml.safe_load(reader.text(EFFECTIVE_CONFIG) or "")
        section = saved.get("slo") if isinstance(saved, Mapping) else None
        return SloConfig.model_validate(section or {})
    except (yaml.YAMLError, ValidationError):
        return SloConfig()


def _ref(target_ms: float | None, name: str, scale: float, unit: str) -> list[Ref]:
    if target_ms is None:
        return []
    return [Ref(target_ms * scale, f"SLO: {name} ≤ {target_ms * scale:g} {unit}")]


def concurrency_figures(windows: LoadWindows) -> list[Figure]:
    """The ramp's figures by concurrency, one unit per chart."""
    steps = windows.steps
    if not steps:
        return []
    levels = [s.get("concurrency") for s in steps]
    names = [str(level) for level in levels]
    marks = windows.step_marks(levels)
    slo = windows.slo
    latency = {
        "e2e p50": [s.get("e2e_p50_s") for s in steps],
        "e2e p95": [s.get("e2e_p95_s") for s in steps],
        "TTFT p95": [s.get("ttft_p95_s") for s in steps],
    }
    refs = [
        *_ref(slo.e2e_p95_ms, "e2e p95", 0.001, "s"),
        *_ref(slo.ttft_p95_ms, "TTFT p95", 0.001, "s"),
    ]
    by_label = {row["label"]: row for row in windows.latency if row.get("phase") == "concurrency"}
    tokens = [by_label.get(window_label(s), {}).get("output_throughput") for s in steps]
    charts = [
        Figure(
            "latency-by-concurrency",
            category_chart(
                "Latency by concurrency",
                (CONCURRENCY_AXIS, "seconds"),
                names,
                latency,
                refs,
                marks,
            ),
            "What to look for: latency flat while concurrency doubles means the engine has "
            "room; a p95 that climbs after the knee is queueing. Where an SLO line is drawn, "
            "the highest step whose p95 stays under it is what the SLO allows.",
        ),
        Figure(
            "throughput-by-concurrency",
            category_chart(
                "Completed requests per second by concurrency",
                (CONCURRENCY_AXIS, "requests per second"),
                names,
                {"completed requests/s": [s.get("throughput_rps") for s in steps]},
                (),
                marks,
            ),
            "What to look for: requests/s should rise with each step; where it flattens, "
            "more concurrency buys no throughput, only latency: that step is the knee.",
        ),
        Figure(
            "tokens-by-concurrency",
            category_chart(
                "Output tokens per second by concurrency",
                (CONCURRENCY_AXIS, "output tokens per second"),
                names,
                {"output tokens/s (all requests)": tokens},
                (),
                marks,
            ),
            "What to look for: the engine's decode throughput; a curve still rising at the "
            "last step means the ramp stopped before the engine saturated.",
        ),
        Figure(
            "queue-by-concurrency",
            category_chart(
                "Requests waiting in the engine by concurrency",
                (CONCURRENCY_AXIS, "requests waiting (peak)"),
                names,
                {"peak waiting requests": [s.get("max_waiting") for s in steps]},
                (),
                marks,
            ),
            "What to look for: zero means every request was scheduled at once; a queue "
            "that grows with concurrency means the engine is full (its KV cache or batch).",
        ),
    ]
    return [c for c in charts if c.svg]


def _percentiles(row: Mapping[str, Any], metric: str) -> dict[int, float | None]:
    return {q: row.get(f"{'median' if q == 50 else f'p{q}'}_{metric}_ms") for q in (50, 90, 95, 99)}


def window_name(row: Mapping[str, Any]) -> str:
    return f"sustained {row.get('label')}" if row.get("phase") == "sustained" else row["label"]


def distribution_figures(windows: LoadWindows) -> list[Figure]:
    """TTFT and ITL p50/p90/p95/p99 of every load window, from its records."""
    rows = windows.latency
    names = [window_name(r) for r in rows]
    levels = [r.get("concurrency") if r.get("phase") == "concurrency" else None for r in rows]
    marks = windows.step_marks(levels)
    slo = windows.slo
    charts = [
        Figure(
            f"{metric}-distribution",
            percentile_chart(
                title,
                ("load window (cN: N requests in flight; n: samples)", "milliseconds"),
                names,
                [_percentiles(r, metric) for r in rows],
                [f"n={r.get(f'{metric}_samples')}" for r in rows],
                _ref(target, f"{metric.upper()} p95", 1.0, "ms"),
                marks,
            ),
            caption,
        )
        for metric, title, target, caption in (
            (
                "ttft",
                "Time to first token per load window",
                slo.ttft_p95_ms,
                "What to look for: the p95 diamond against the SLO line; a long whisker "
                "(p99 far above p95) means a few users wait much longer than most. TTFT is "
                "counted from the intended send, so time queued in the client counts.",
            ),
            (
                "itl",
                "Inter-token latency per load window",
                slo.itl_p95_ms,
                "What to look for: the gaps between streamed tokens; a p95 that rises with "
                "concurrency means decoding slows as the batch grows; a tall whisker means "
                "stalls mid-answer (a prefill of another request, a preemption).",
            ),
        )
    ]
    return [c for c in charts if c.svg]
