"""Latency charts on `plots`' frame: a percentile strip per load window (TTFT, ITL: p50 to
p90 as a box, p95 as a diamond, a whisker to p99) and latency over time with a fitted drift
line and the band its slope's 95% interval spans."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from golive.report.plots import (
    LegendItem,
    Mark,
    Ref,
    XAxis,
    YAxis,
    category_labels,
    category_x,
    fmt,
    frame,
    mark_lines,
    ref_lines,
)

STRIP = "#1f77b4"
PERCENTILES = (50, 90, 95, 99)


def percentile_chart(
    title: str,
    axes: tuple[str, str],
    categories: Sequence[str],
    percentiles: Sequence[Mapping[int, float | None]],
    notes: Sequence[str] = (),
    refs: Sequence[Ref] = (),
    marks: Sequence[Mark] = (),
) -> str:
    """One strip per category from its p50, p90, p95 and p99 (a category without a p50 is
    left empty); `notes` under each tick (the sample count)."""
    drawn = [
        (i, {q: v for q in PERCENTILES if (v := p.get(q)) is not None})
        for i, p in enumerate(percentiles[: len(categories)])
    ]
    drawn = [(i, p) for i, p in drawn if 50 in p]
    values = [v for _, p in drawn for v in p.values()]
    if not values:
        return ""
    y_axis = YAxis.over([*values, *(r.value for r in refs)])
    body: list[str] = []
    for i, p in drawn:
        x = category_x(i, len(categories))
        top = p.get(99, p.get(95, p.get(90, p[50])))
        tip = ", ".join(f"p{q} {fmt(v)}" for q, v in p.items())
        body.append(
            f'<g class="strip"><title>{escape(categories[i])}: {tip}</title>'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_axis.y(p[50]):.1f}" '
            f'y2="{y_axis.y(top):.1f}" stroke="{STRIP}" stroke-width="1.5"/>'
            f'<line x1="{x - 6:.1f}" x2="{x + 6:.1f}" y1="{y_axis.y(top):.1f}" '
            f'y2="{y_axis.y(top):.1f}" stroke="{STRIP}" stroke-width="1.5"/>'
        )
        if 90 in p:
            y90, y50 = y_axis.y(p[90]), y_axis.y(p[50])
            body.append(
                f'<rect x="{x - 10:.1f}" y="{y90:.1f}" width="20" height="{max(y50 - y90, 1):.1f}" '
                f'fill="#a6c8e8" stroke="{STRIP}"/>'
            )
        body.append(
            f'<line x1="{x - 10:.1f}" x2="{x + 10:.1f}" y1="{y_axis.y(p[50]):.1f}" '
            f'y2="{y_axis.y(p[50]):.1f}" stroke="#0b3d6b" stroke-width="3"/>'
        )
        if 95 in p:
            y95 = y_axis.y(p[95])
            body.append(f'<path d="M{x:.1f} {y95 - 5:.1f} l5 5 l-5 5 l-5 -5 z" fill="#d62728"/>')
        body.append("</g>")
    lines, named = ref_lines(y_axis, refs)
    marked, marks_named = mark_lines([(category_x(m.at, len(categories)), m) for m in marks])
    legend = [
        LegendItem("p50 (median)", "#0b3d6b"),
        LegendItem("p50 to p90", "#a6c8e8", "box"),
        LegendItem("p95", "#d62728", "diamond"),
        LegendItem("whisker to p99", STRIP),
    ]
    return frame(
        title,
        axes,
        y_axis,
        category_labels(categories, notes),
        [*lines, *marked, *body],
        [*legend, *named, *marks_named],
    )


@dataclass(frozen=True, slots=True)
class Drift:
    """A fitted slope with its 95% interval, through the points' mean (where a least-squares
    line passes)."""

    slope: float
    low: float
    high: float
    unit: str = "s per s"


def drift_chart(
    title: str,
    axes: tuple[str, str],
    points: Sequence[tuple[float, float]],
    drift: Drift | None,
    refs: Sequence[Ref] = (),
) -> str:
    """Each point (t, y), the fitted line through their mean and the band its slope's
    interval spans over the window."""
    if not points:
        return ""
    ts = [t for t, _ in points]
    t0, t1 = min(ts), max(ts)
    mean_t = sum(ts) / len(points)
    mean_y = sum(y for _, y in points) / len(points)

    def at(slope: float, t: float) -> float:
        return mean_y + slope * (t - mean_t)

    ends = [] if drift is None else [at(s, t) for s in (drift.low, drift.high) for t in (t0, t1)]
    y_axis = YAxis.over([*(y for _, y in points), *ends, *(r.value for r in refs)])
    x_axis = XAxis.over(t0, t1)
    body = [
        "".join(
            f'<circle cx="{x_axis.x(t):.1f}" cy="{y_axis.y(y):.1f}" r="1.6" fill="#1f77b4" '
            'fill-opacity="0.45"/>'
            for t, y in points
        )
    ]
    legend = [LegendItem(f"answer ({len(points):,})", "#1f77b4", "dot")]
    if drift is not None:
        band = " ".join(
            f"{x_axis.x(t):.1f},{y_axis.y(at(s, t)):.1f}"
            for s, t in ((drift.low, t0), (drift.low, t1), (drift.high, t1), (drift.high, t0))
        )
        body.append(f'<polygon class="band" points="{band}" fill="#d62728" fill-opacity="0.18"/>')
        body.append(
            f'<line class="fit" x1="{x_axis.x(t0):.1f}" x2="{x_axis.x(t1):.1f}" '
            f'y1="{y_axis.y(at(drift.slope, t0)):.1f}" y2="{y_axis.y(at(drift.slope, t1)):.1f}" '
            'stroke="#d62728" stroke-width="2"/>'
        )
        legend += [
            LegendItem(f"fitted drift {drift.slope:+.2g} {drift.unit}", "#d62728"),
            LegendItem(
                f"slope's 95% interval {drift.low:+.2g}..{drift.high:+.2g}", "#f2b8b8", "box"
            ),
        ]
    lines, named = ref_lines(y_axis, refs)
    return frame(title, axes, y_axis, x_axis.labels(), [*body, *lines], [*legend, *named])
