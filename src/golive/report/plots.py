"""Inline SVG charts for the self-contained HTML report: no scripts, no remote assets.

Pure functions from numbers to an SVG string: a line chart (with shaded phases), a grouped
bar chart and an interval chart (pass rates with their Wilson intervals).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

W, H = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
PHASE_FILL = ("#f3f6fb", "#fbf7ef")


def _scale(lo: float, hi: float, a: float, b: float) -> tuple[float, float]:
    span = (hi - lo) or 1.0
    return (b - a) / span, a - lo * (b - a) / span


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _frame(title: str, y_label: str, lo: float, hi: float, body: list[str]) -> str:
    ky, by = _scale(lo, hi, H - BOTTOM, TOP)
    ticks = []
    for i in range(5):
        value = lo + (hi - lo) * i / 4
        y = ky * value + by
        ticks.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(value)}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
        f'height="{H}" font-family="sans-serif" font-size="11" role="img" '
        f'aria-label="{escape(title)}">'
        f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
        f'<text x="12" y="{(TOP + H - BOTTOM) / 2:.0f}" transform="rotate(-90 12 '
        f'{(TOP + H - BOTTOM) / 2:.0f})" text-anchor="middle">{escape(y_label)}</text>'
        + "".join(ticks)
        + "".join(body)
        + f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#888"/>'
        "</svg>"
    )


def line_chart(
    title: str,
    x_label: str,
    y_label: str,
    x: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    phases: Sequence[str] = (),
) -> str:
    """Lines over x; `phases` (one label per x) shades each phase's span and names it."""
    values = [v for s in series.values() for v in s if v is not None]
    if not x or not values:
        return ""
    lo, hi = min(0.0, *values), max(values) or 1.0
    kx, bx = _scale(min(x), max(x), LEFT, W - RIGHT)
    ky, by = _scale(lo, hi, H - BOTTOM, TOP)
    body: list[str] = []
    start = 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            x0, x1 = kx * x[start] + bx, kx * x[i - 1] + bx
            fill = PHASE_FILL[len(body) % 2]
            body.append(
                f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" '
                f'height="{H - BOTTOM - TOP}" fill="{fill}"/>'
                f'<text x="{x0 + 3:.1f}" y="{TOP + 10}" fill="#777">{escape(phases[start])}</text>'
            )
            start = i
    for n, (name, ys) in enumerate(series.items()):
        points = " ".join(
            f"{kx * xv + bx:.1f},{ky * yv + by:.1f}"
            for xv, yv in zip(x, ys, strict=False)
            if yv is not None
        )
        colour = COLOURS[n % len(COLOURS)]
        body.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{points}"/>'
        )
        legend_x = LEFT + 8 + 150 * n
        body.append(
            f'<text x="{legend_x}" y="{H - 8}" fill="{colour}">&#9632; {escape(name)}</text>'
        )
    body.append(
        f'<text x="{W - RIGHT}" y="{H - 24}" text-anchor="end">{escape(x_label)} '
        f"({_fmt(min(x))}–{_fmt(max(x))})</text>"
    )
    return _frame(title, y_label, lo, hi, body)


def bar_chart(
    title: str, y_label: str, groups: Sequence[str], series: Mapping[str, Sequence[float | None]]
) -> str:
    """Bars grouped by category (one bar per series in each group)."""
    values = [v for s in series.values() for v in s if v is not None]
    if not groups or not values:
        return ""
    hi = max(values) or 1.0
    ky, by = _scale(0.0, hi, H - BOTTOM, TOP)
    slot = (W - LEFT - RIGHT) / len(groups)
    width = max(2.0, slot * 0.8 / max(1, len(series)))
    body: list[str] = []
    for g, group in enumerate(groups):
        x0 = LEFT + g * slot + slot * 0.1
        for n, ys in enumerate(series.values()):
            value = ys[g] if g < len(ys) else None
            if value is None:
                continue
            y = ky * value + by
            body.append(
                f'<rect x="{x0 + n * width:.1f}" y="{y:.1f}" width="{width - 1:.1f}" '
                f'height="{H - BOTTOM - y:.1f}" fill="{COLOURS[n % len(COLOURS)]}">'
                f"<title>{escape(group)}: {_fmt(value)}</title></rect>"
            )
        body.append(
            f'<text x="{x0 + slot * 0.4:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle" '
            f'font-size="9">{escape(group[:14])}</text>'
        )
    for n, name in enumerate(series):
        body.append(
            f'<text x="{LEFT + 8 + 170 * n}" y="{H - 8}" fill="{COLOURS[n % len(COLOURS)]}">'
            f"&#9632; {escape(name)}</text>"
        )
    return _frame(title, y_label, 0.0, hi, body)


def interval_chart(title: str, rows: Sequence[tuple[str, float, float, float]]) -> str:
    """Pass rates (0..1) as dots with their confidence intervals, one row per case."""
    if not rows:
        return ""
    height = TOP + 22 * len(rows) + 30
    left, right = 190, W - RIGHT
    kx, bx = _scale(0.0, 1.0, left, right)
    body = [f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = kx * tick + bx
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{height - 24}" stroke="#e5e5e5"/>'
            f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{tick:.0%}</text>'
        )
    for i, (name, rate, low, high) in enumerate(rows):
        y = TOP + 22 * i + 11
        colour = "#2ca02c" if rate >= 1.0 else "#d62728" if rate < 0.5 else "#ff7f0e"
        body.append(
            f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(name)}</text>'
            f'<line x1="{kx * low + bx:.1f}" x2="{kx * high + bx:.1f}" y1="{y}" y2="{y}" '
            f'stroke="{colour}" stroke-width="3"/>'
            f'<circle cx="{kx * rate + bx:.1f}" cy="{y}" r="5" fill="{colour}">'
            f"<title>{escape(name)}: {rate:.0%} ({low:.0%}–{high:.0%})</title></circle>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" '
        f'height="{height}" font-family="sans-serif" font-size="11" role="img" '
        f'aria-label="{escape(title)}">' + "".join(body) + "</svg>"
    )
