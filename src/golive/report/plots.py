"""Inline SVG charts for the self-contained HTML report: no scripts, no remote assets.

Pure functions from numbers to an SVG string. Every chart has a title, a labelled x and y
axis (`class="x-label"`, `class="y-label"`) with ticks, one unit on its y axis, and a legend
under the x axis naming each series and each reference line (an SLO target, a headroom
limit) or marker (the knee), so no label is drawn over the data or over another label. Text
widths are estimated from the font size (`text_width`), generously, to lay labels out apart.

The frame, the axes and the legend are here with the line chart (numeric x: time), the
by-category chart (the ramp's concurrency steps as categorical positions), the bar chart
and the interval chart; the latency distributions and the drift fit are in `plots_latency`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

W = 720
LEFT, RIGHT, TOP, PLOT_H = 70, 16, 28, 188
PLOT_W = W - LEFT - RIGHT
BOTTOM_Y = TOP + PLOT_H
FONT = 11
CHAR = 0.62  # a sans-serif character's width per pixel of font size, rounded up
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
REF_COLOURS = ("#6e40c9", "#bc4c00", "#0a7d5a", "#555555")
PHASE_FILL = ("#f3f6fb", "#fbf7ef")


@dataclass(frozen=True, slots=True)
class Ref:
    """A horizontal reference line at `value` (an SLO target, a memory limit)."""

    value: float
    label: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A vertical marker at a category index (by-category charts) or an x value."""

    at: float
    label: str


@dataclass(frozen=True, slots=True)
class LegendItem:
    label: str
    colour: str
    kind: str = "line"  # line, dash, box, dot, diamond


def text_width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR


def fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k apart) covering lo..hi."""
    span = (hi - lo) or abs(hi) or 1.0
    raw = span / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.999)
    start = math.floor(lo / step + 1e-9) * step
    ticks = [start]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(start + step * len(ticks))
    return ticks


def tick_text(value: float, ticks: Sequence[float]) -> str:
    """A tick's label with as many decimals as the ticks' spacing needs; from 100,000 up, in
    thousands, millions, ... (k, M, G, T) so it stays inside the margin."""
    if max((abs(t) for t in ticks), default=abs(value)) >= 1e5:
        return _compact(value)
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    decimals = 0
    while decimals < 6 and abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1
    return f"{value:,.{decimals}f}"


def _compact(value: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


@dataclass(frozen=True, slots=True)
class YAxis:
    """The y scale of a chart's plot area, from its round ticks."""

    ticks: tuple[float, ...]

    @classmethod
    def over(cls, values: Sequence[float], zero: bool = True) -> YAxis:
        values = [v for v in values if math.isfinite(v)] or [0.0]
        lo, hi = min(values), max(values)
        if zero:
            lo = min(lo, 0.0)
        if hi == lo:
            hi = lo + (abs(lo) or 1.0)
        return cls(tuple(nice_ticks(lo, hi)))

    def y(self, value: float) -> float:
        lo, hi = self.ticks[0], self.ticks[-1]
        return BOTTOM_Y - (value - lo) / ((hi - lo) or 1.0) * PLOT_H


@dataclass(frozen=True, slots=True)
class XAxis:
    """A numeric x scale over the plot area's width (the data's range), round ticks in it."""

    lo: float
    hi: float

    @classmethod
    def over(cls, lo: float, hi: float) -> XAxis:
        return cls(lo, hi if hi > lo else lo + 1.0)

    def x(self, value: float) -> float:
        return LEFT + (value - self.lo) / (self.hi - self.lo) * PLOT_W

    def labels(self) -> list[tuple[float, str, str]]:
        ticks = [t for t in nice_ticks(self.lo, self.hi, 7) if self.lo <= t <= self.hi]
        return [(self.x(t), tick_text(t, ticks), "") for t in ticks]


def category_x(index: float, count: int) -> float:
    """The centre of category `index` of `count` across the plot area."""
    return LEFT + PLOT_W / max(count, 1) * (index + 0.5)


def category_labels(
    names: Sequence[str], notes: Sequence[str] = ()
) -> list[tuple[float, str, str]]:
    """Tick labels at each category (a second line: `notes`); `frame` stands them upright
    where they do not fit their slots side by side."""
    out = []
    for i, name in enumerate(names):
        note = notes[i] if i < len(notes) else ""
        short = name if len(name) <= 30 else name[:29] + "…"
        out.append((category_x(i, len(names)), short, note))
    return out


def _upright(x_ticks: Sequence[tuple[float, str, str]]) -> bool:
    """Whether the tick labels are too wide to stand side by side."""
    xs = [x for x, _, _ in x_ticks]
    slot = min((b - a for a, b in itertools.pairwise(xs)), default=float(PLOT_W))
    return any(text_width(max(t, n, key=len)) > slot - 6 for _, t, n in x_ticks)


def _tick_labels(x_ticks: Sequence[tuple[float, str, str]]) -> tuple[list[str], float]:
    """The x tick labels and how far under the axis they reach."""
    out = []
    upright = _upright(x_ticks)
    for x, text, note in x_ticks:
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{BOTTOM_Y}" y2="{BOTTOM_Y + 4}" stroke="#888"/>'
        )
        if upright:
            label = f"{text} {note}".strip()
            y = BOTTOM_Y + 8
            out.append(
                f'<text class="x-tick" x="{x + 4:.1f}" y="{y}" text-anchor="end" '
                f'transform="rotate(-90 {x + 4:.1f} {y})">{escape(label)}</text>'
            )
            continue
        out.append(
            f'<text class="x-tick" x="{x:.1f}" y="{BOTTOM_Y + 16}" text-anchor="middle">'
            f"{escape(text)}</text>"
        )
        if note:
            out.append(
                f'<text class="x-tick" x="{x:.1f}" y="{BOTTOM_Y + 29}" text-anchor="middle" '
                f'fill="#666">{escape(note)}</text>'
            )
    if upright:
        longest = max(text_width(f"{t} {n}".strip()) for _, t, n in x_ticks)
        return out, 8 + longest + 4
    return out, 29 if any(note for _, _, note in x_ticks) else 16


def _legend(items: Sequence[LegendItem], top: float) -> tuple[str, int]:
    """The legend's SVG laid out in rows under the axis, and how many rows it took."""
    out: list[str] = []
    x, row = float(LEFT), 0
    for item in items:
        width = 22 + text_width(item.label) + 18
        if x + width > W - RIGHT and x > LEFT:
            x, row = float(LEFT), row + 1
        y = top + 15 * row
        c = item.colour
        swatch = {
            "line": f'<line x1="{x}" x2="{x + 16}" y1="{y - 4}" y2="{y - 4}" stroke="{c}" '
            'stroke-width="2"/>',
            "dash": f'<line x1="{x}" x2="{x + 16}" y1="{y - 4}" y2="{y - 4}" stroke="{c}" '
            'stroke-width="2" stroke-dasharray="4 3"/>',
            "box": f'<rect x="{x + 3}" y="{y - 9}" width="10" height="10" fill="{c}"/>',
            "dot": f'<circle cx="{x + 8}" cy="{y - 4}" r="3.5" fill="{c}"/>',
            "diamond": f'<path d="M{x + 8} {y - 9} l5 5 l-5 5 l-5 -5 z" fill="{c}"/>',
        }[item.kind]
        out.append(
            f'<g class="legend">{swatch}<text x="{x + 22}" y="{y}">{escape(item.label)}</text></g>'
        )
        x += width
    return "".join(out), (row + 1 if items else 0)


def frame(
    title: str,
    axes: tuple[str, str],
    y_axis: YAxis,
    x_ticks: Sequence[tuple[float, str, str]],
    body: Sequence[str],
    legend: Sequence[LegendItem] = (),
) -> str:
    """The chart around `body`: title, y grid and ticks, x ticks, both axis labels, legend."""
    x_label, y_label = axes
    ticks, depth = _tick_labels(x_ticks)
    label_y = BOTTOM_Y + depth + 14
    legend_svg, rows = _legend(legend, label_y + 18)
    height = label_y + 18 + 15 * rows
    grid = []
    for value in y_axis.ticks:
        y = y_axis.y(value)
        grid.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text class="y-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{tick_text(value, y_axis.ticks)}</text>"
        )
    middle = TOP + PLOT_H / 2
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" '
        f'height="{height}" font-family="sans-serif" font-size="{FONT}" role="img" '
        f'aria-label="{escape(title)}">'
        f'<text class="title" x="{LEFT}" y="16" font-size="13" font-weight="bold">'
        f"{escape(title)}</text>"
        + "".join(grid)
        + "".join(body)
        + f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BOTTOM_Y}" stroke="#888"/>'
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{BOTTOM_Y}" y2="{BOTTOM_Y}" stroke="#888"/>'
        + "".join(ticks)
        + f'<text class="y-label" x="13" y="{middle:.0f}" transform="rotate(-90 13 {middle:.0f})" '
        f'text-anchor="middle">{escape(y_label)}</text>'
        f'<text class="x-label" x="{LEFT + PLOT_W / 2:.0f}" y="{label_y}" text-anchor="middle">'
        f"{escape(x_label)}</text>" + legend_svg + "</svg>"
    )


def ref_lines(y_axis: YAxis, refs: Sequence[Ref]) -> tuple[list[str], list[LegendItem]]:
    """Dashed horizontal lines across the plot, named in the legend."""
    body, legend = [], []
    for n, ref in enumerate(refs):
        colour = REF_COLOURS[n % len(REF_COLOURS)]
        y = y_axis.y(ref.value)
        body.append(
            f'<line class="ref" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="6 4">'
            f"<title>{escape(ref.label)}</title></line>"
        )
        legend.append(LegendItem(ref.label, colour, "dash"))
    return body, legend


def mark_lines(xs: Sequence[tuple[float, Mark]]) -> tuple[list[str], list[LegendItem]]:
    """Vertical markers at pixel x, named in the legend (two at one x drawn side by side)."""
    body, legend, seen = [], [], dict[float, int]()
    for n, (x, mark) in enumerate(xs):
        shift = 4 * seen.get(round(x), 0)
        seen[round(x)] = seen.get(round(x), 0) + 1
        colour = ("#444444", "#e377c2", "#8c564b")[n % 3]
        body.append(
            f'<line class="mark" x1="{x + shift:.1f}" x2="{x + shift:.1f}" y1="{TOP}" '
            f'y2="{BOTTOM_Y}" stroke="{colour}" stroke-width="2" stroke-dasharray="2 3">'
            f"<title>{escape(mark.label)}</title></line>"
        )
        legend.append(LegendItem(mark.label, colour, "dash"))
    return body, legend


def _values(series: Mapping[str, Sequence[float | None]]) -> list[float]:
    return [v for s in series.values() for v in s if v is not None]


def category_chart(
    title: str,
    axes: tuple[str, str],
    categories: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    refs: Sequence[Ref] = (),
    marks: Sequence[Mark] = (),
) -> str:
    """Points at each category (a marker at every tested step) joined per series; `marks`
    at a category index, `refs` across."""
    values = _values(series)
    if not categories or not values:
        return ""
    y_axis = YAxis.over([*values, *(r.value for r in refs)])
    body, legend = [], []
    count = len(categories)
    for n, (name, ys) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        points = [
            (category_x(i, count), y_axis.y(v), categories[i], v)
            for i, v in enumerate(ys[:count])
            if v is not None
        ]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{line}"/>')
        body += [
            f'<circle class="marker" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
            f"<title>{escape(name)} at {escape(c)}: {fmt(v)}</title></circle>"
            for x, y, c, v in points
        ]
        legend.append(LegendItem(name, colour, "dot"))
    lines, named = ref_lines(y_axis, refs)
    marked, marks_named = mark_lines([(category_x(m.at, count), m) for m in marks])
    return frame(
        title,
        axes,
        y_axis,
        category_labels(categories),
        [*lines, *marked, *body],
        [*legend, *named, *marks_named],
    )


def _phase_spans(x_axis: XAxis, x: Sequence[float], phases: Sequence[str]) -> list[str]:
    """Each phase's span shaded; its name over it in the first of three rows with room."""
    spans: list[str] = []
    names: list[str] = []
    ends = [float(LEFT) - 1e9] * 3
    start = 0
    for i in range(1, len(phases) + 1):
        if i < len(phases) and phases[i] == phases[start]:
            continue
        x0, x1 = x_axis.x(x[start]), x_axis.x(x[i - 1])
        name = phases[start]
        spans.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" height="{PLOT_H}" '
            f'fill="{PHASE_FILL[len(spans) % 2]}"><title>{escape(name)}</title></rect>'
        )
        row = next((r for r in range(3) if ends[r] < x0 - 4), None)
        if row is not None and x0 + text_width(name, 10) < W - RIGHT:
            ends[row] = x0 + 3 + text_width(name, 10)
            names.append(
                f'<text class="phase" x="{x0 + 3:.1f}" y="{TOP + 11 + 12 * row}" '
                f'font-size="10" fill="#555">{escape(name)}</text>'
            )
        start = i
    return spans + names


def line_chart(
    title: str,
    axes: tuple[str, str],
    x: Sequence[float],
    series: Mapping[str, Sequence[float | None]],
    phases: Sequence[str] = (),
    refs: Sequence[Ref] = (),
) -> str:
    """Lines over a numeric x; `phases` (one label per x) shades each phase's span."""
    values = _values(series)
    if not x or not values:
        return ""
    y_axis = YAxis.over([*values, *(r.value for r in refs)])
    x_axis = XAxis.over(min(x), max(x))
    body = _phase_spans(x_axis, x, phases) if phases else []
    legend = []
    for n, (name, ys) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        points = " ".join(
            f"{x_axis.x(xv):.1f},{y_axis.y(yv):.1f}"
            for xv, yv in zip(x, ys, strict=False)
            if yv is not None
        )
        body.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{points}"/>'
        )
        legend.append(LegendItem(name, colour))
    lines, named = ref_lines(y_axis, refs)
    return frame(title, axes, y_axis, x_axis.labels(), [*body, *lines], [*legend, *named])
