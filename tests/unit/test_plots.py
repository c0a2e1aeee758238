"""The report's inline SVG charts are well-formed and show what they were given."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from golive.report.plots import Mark, Ref, category_chart, line_chart, nice_ticks
from golive.report.plots_bars import bar_chart, interval_chart
from golive.report.plots_latency import Drift, drift_chart, percentile_chart

SVG = "{http://www.w3.org/2000/svg}"


def _texts(root: ET.Element, cls: str | None = None) -> list[str]:
    return [
        t.text or ""
        for t in root.iter(f"{SVG}text")
        if cls is None or (t.get("class") or "") == cls
    ]


def _axes_labelled(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert [t for t in _texts(root, "x-label") if t.strip()], "no x axis label"
    assert [t for t in _texts(root, "y-label") if t.strip()], "no y axis label"
    return root


def test_line_chart_shades_phases_and_draws_each_series() -> None:
    """A line chart draws each series, skips a missing sample and labels the phases."""
    svg = line_chart(
        "Memory by phase",
        ("time (s)", "MB"),
        [0.0, 1.0, 2.0, 3.0],
        {"host_rss_mib": [4700.0, 4710.0, None, 4800.0], "kv": [0.0, 0.1, 0.2, 0.3]},
        ["long_input", "long_input", "concurrency", "concurrency"],
    )
    root = _axes_labelled(svg)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2
    assert len(lines[0].get("points", "").split()) == 3  # the missing sample is skipped
    texts = _texts(root)
    assert "long_input" in texts
    assert "concurrency" in texts


def test_empty_inputs_draw_nothing() -> None:
    """Charts with no data draw nothing rather than an empty frame."""
    assert line_chart("t", ("x", "y"), [], {"a": []}) == ""
    assert category_chart("t", ("x", "y"), [], {}) == ""
    assert bar_chart("t", ("x", "y"), [], {}) == ""
    assert interval_chart("t", []) == ""
    assert percentile_chart("t", ("x", "y"), ["c1"], [{50: None}]) == ""
    assert drift_chart("t", ("x", "y"), [], None) == ""


def test_bar_and_interval_charts() -> None:
    """Bar heights follow the values, and interval dots are coloured and placed by pass rate."""
    bars = _axes_labelled(
        bar_chart(
            "Reuse",
            ("step", "tokens"),
            ["cold-0", "warm-0"],
            {"prompt": [700, 704], "cached": [0, 640]},
        )
    )
    heights = [float(r.get("height", "0")) for r in bars.iter(f"{SVG}rect")]
    assert len(heights) == 4 + 2  # the bars and the legend's two swatches
    assert heights[1] == 0.0  # cold: nothing cached
    assert heights[3] > 0.0
    rows = [("one_arg.required", 1.0, 0.83, 1.0), ("one_arg.auto", 0.0, 0.0, 0.17)]
    intervals = _axes_labelled(interval_chart("Pass rate", rows))
    dots = list(intervals.iter(f"{SVG}circle"))
    assert [d.get("fill") for d in dots] == ["#2ca02c", "#d62728"]
    assert float(dots[0].get("cx", "0")) > float(dots[1].get("cx", "0"))


def test_category_chart_ticks_and_marks_every_tested_step() -> None:
    """By concurrency, each tested step has its own tick and marker, evenly spaced whatever the
    level (1, 2, 4, 8 as categories), the knee is a vertical line at its step and an SLO a
    horizontal line at its value, both named in the legend."""
    svg = category_chart(
        "Latency by concurrency",
        ("concurrency", "seconds"),
        ["1", "2", "4", "8"],
        {"e2e p95": [1.0, 1.1, 1.5, None]},
        refs=[Ref(2.0, "SLO: e2e p95 ≤ 2 s")],
        marks=[Mark(2, "knee: 4")],
    )
    root = _axes_labelled(svg)
    assert _texts(root, "x-tick") == ["1", "2", "4", "8"]
    ticks = [float(t.get("x", "0")) for t in root.iter(f"{SVG}text") if t.get("class") == "x-tick"]
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps) - min(gaps) < 0.5  # categorical: equal steps (to the drawn 0.1 px)
    markers = [c for c in root.iter(f"{SVG}circle") if c.get("class") == "marker"]
    assert [float(c.get("cx", "0")) for c in markers] == ticks[:3]  # none for the missing one
    assert float(markers[0].get("cy", "0")) > float(markers[2].get("cy", "0"))  # 1.0 below 1.5
    (knee,) = [line for line in root.iter(f"{SVG}line") if line.get("class") == "mark"]
    assert float(knee.get("x1", "0")) == ticks[2]
    (slo,) = [line for line in root.iter(f"{SVG}line") if line.get("class") == "ref"]
    assert float(slo.get("y1", "0")) < float(markers[2].get("cy", "0"))  # 2 s above 1.5 s
    legend = _texts(root)
    assert "SLO: e2e p95 ≤ 2 s" in legend
    assert "knee: 4" in legend


def test_percentile_strip_orders_its_percentiles() -> None:
    """A strip's box runs from p50 up to p90, its p95 diamond above the box and its whisker
    up to p99; a window without figures is left empty but keeps its tick."""
    svg = percentile_chart(
        "TTFT",
        ("window", "ms"),
        ["c1", "c2"],
        [{50: 100.0, 90: 200.0, 95: 250.0, 99: 400.0}, {50: None}],
        notes=["n=40", "n=0"],
    )
    root = _axes_labelled(svg)
    assert _texts(root, "x-tick") == ["c1", "n=40", "c2", "n=0"]
    (strip,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "strip"]
    box = strip.find(f"{SVG}rect")
    assert box is not None
    top, height = float(box.get("y", "0")), float(box.get("height", "0"))
    whisker = strip.findall(f"{SVG}line")[0]
    p99_y = min(float(whisker.get("y1", "0")), float(whisker.get("y2", "0")))
    diamond = strip.find(f"{SVG}path")
    assert diamond is not None
    p95_y = float(diamond.get("d", "M0 0").split()[1]) + 5
    assert p99_y < p95_y < top < top + height  # y grows downwards


def test_drift_chart_draws_the_fit_through_the_points_and_its_band() -> None:
    """The fitted line rises by its slope over the window and the band spans the slope's
    interval: wider at the ends than at the middle."""
    points = [(float(t), 1.0 + 0.01 * t) for t in range(0, 101, 5)]
    root = _axes_labelled(
        drift_chart("drift", ("t", "s"), points, Drift(0.01, 0.008, 0.012), [Ref(3.0, "SLO")])
    )
    (fit,) = [line for line in root.iter(f"{SVG}line") if line.get("class") == "fit"]
    assert float(fit.get("y2", "0")) < float(fit.get("y1", "0"))  # rises left to right
    (band,) = [p for p in root.iter(f"{SVG}polygon") if p.get("class") == "band"]
    corners = [tuple(map(float, c.split(","))) for c in band.get("points", "").split()]
    left = abs(corners[0][1] - corners[3][1])
    right = abs(corners[1][1] - corners[2][1])
    assert left > 0
    assert right > 0
    assert len(list(root.iter(f"{SVG}circle"))) >= len(points)


def test_nice_ticks_cover_the_range_with_round_steps() -> None:
    """Axis ticks are round numbers that cover the data (no 0.733 steps)."""
    ticks = nice_ticks(0.0, 3.82)
    assert ticks[0] <= 0.0
    assert ticks[-1] >= 3.82
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    (step,) = steps
    assert step in (0.5, 1.0)
