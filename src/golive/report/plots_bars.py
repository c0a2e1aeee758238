"""The report's bar chart (the cache steps) and interval chart (the Agent cases' pass rates
with their Wilson intervals), on `plots`' frame."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from golive.report.plots import (
    COLOURS,
    FONT,
    LEFT,
    PLOT_W,
    RIGHT,
    TOP,
    LegendItem,
    W,
    YAxis,
    category_labels,
    fmt,
    frame,
)


def bar_chart(
    title: str,
    axes: tuple[str, str],
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
) -> str:
    """Bars grouped by category (one bar per series in each group)."""
    values = [v for s in series.values() for v in s if v is not None]
    if not groups or not values:
        return ""
    y_axis = YAxis.over(values)
    slot = PLOT_W / len(groups)
    width = max(2.0, slot * 0.8 / max(1, len(series)))
    body: list[str] = []
    for g, group in enumerate(groups):
        x0 = LEFT + g * slot + slot * 0.1
        for n, ys in enumerate(series.values()):
            value = ys[g] if g < len(ys) else None
            if value is None:
                continue
            y = y_axis.y(value)
            body.append(
                f'<rect x="{x0 + n * width:.1f}" y="{y:.1f}" width="{width - 1:.1f}" '
                f'height="{y_axis.y(0.0) - y:.1f}" fill="{COLOURS[n % len(COLOURS)]}">'
                f"<title>{escape(group)}: {fmt(value)}</title></rect>"
            )
    legend = [LegendItem(name, COLOURS[n % len(COLOURS)], "box") for n, name in enumerate(series)]
    return frame(title, axes, y_axis, category_labels(groups), body, legend)


def interval_chart(title: str, rows: Sequence[tuple[str, float, float, float]]) -> str:
    """Pass rates (0..1) as dots with their confidence intervals, one row per case."""
    if not rows:
        return ""
    height = TOP + 22 * len(rows) + 44
    left, right = 190, W - RIGHT
    scale = right - left
    bottom = height - 38
    body = [
        f'<text class="title" x="{left}" y="16" font-size="13" font-weight="bold">'
        f"{escape(title)}</text>"
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = left + scale * tick
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{bottom}" stroke="#e5e5e5"/>'
            f'<text class="x-tick" x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">'
            f"{tick:.0%}</text>"
        )
    for i, (name, rate, low, high) in enumerate(rows):
        y = TOP + 22 * i + 11
        colour = "#2ca02c" if rate >= 1.0 else "#d62728" if rate < 0.5 else "#ff7f0e"
        body.append(
            f'<text class="y-tick" x="{left - 8}" y="{y + 4}" text-anchor="end">'
            f"{escape(name)}</text>"
            f'<line x1="{left + scale * low:.1f}" x2="{left + scale * high:.1f}" y1="{y}" '
            f'y2="{y}" stroke="{colour}" stroke-width="3"/>'
            f'<circle cx="{left + scale * rate:.1f}" cy="{y}" r="5" fill="{colour}">'
            f"<title>{escape(name)}: {rate:.0%} ({low:.0%}–{high:.0%})</title></circle>"
        )
    middle = (TOP + bottom) / 2
    body.append(
        f'<text class="x-label" x="{left + scale / 2:.0f}" y="{height - 6}" '
        'text-anchor="middle">pass rate (dot) and its 95% interval (bar)</text>'
        f'<text class="y-label" x="13" y="{middle:.0f}" transform="rotate(-90 13 {middle:.0f})" '
        'text-anchor="middle">case</text>'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" '
        f'height="{height}" font-family="sans-serif" font-size="{FONT}" role="img" '
        f'aria-label="{escape(title)}">' + "".join(body) + "</svg>"
    )
