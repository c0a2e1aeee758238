"""The report's inline SVG charts are well-formed and show what they were given."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from golive.report.plots import bar_chart, interval_chart, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_line_chart_shades_phases_and_draws_each_series() -> None:
    """A line chart draws each series, skips a missing sample and labels the phases."""
    svg = line_chart(
        "Memory by phase",
        "time (s)",
        "MB",
        [0.0, 1.0, 2.0, 3.0],
        {"host_rss_mib": [4700.0, 4710.0, None, 4800.0], "kv": [0.0, 0.1, 0.2, 0.3]},
        ["long_input", "long_input", "concurrency", "concurrency"],
    )
    root = ET.fromstring(svg)
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2
    assert len(lines[0].get("points", "").split()) == 3  # the missing sample is skipped
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "long_input" in texts
    assert "concurrency" in texts


def test_empty_inputs_draw_nothing() -> None:
    """Charts with no data draw nothing rather than an empty frame."""
    assert line_chart("t", "x", "y", [], {"a": []}) == ""
    assert bar_chart("t", "y", [], {}) == ""
    assert interval_chart("t", []) == ""


def test_bar_and_interval_charts() -> None:
    """Bar heights follow the values, and interval dots are coloured and placed by pass rate."""
    bars = ET.fromstring(
        bar_chart(
            "Reuse", "tokens", ["cold-0", "warm-0"], {"prompt": [700, 704], "cached": [0, 640]}
        )
    )
    heights = [float(r.get("height", "0")) for r in bars.iter(f"{SVG}rect")]
    assert len(heights) == 4
    assert heights[1] == 0.0  # cold: nothing cached
    assert heights[3] > 0.0
    rows = [("one_arg.required", 1.0, 0.83, 1.0), ("one_arg.auto", 0.0, 0.0, 0.17)]
    intervals = ET.fromstring(interval_chart("Pass rate", rows))
    dots = list(intervals.iter(f"{SVG}circle"))
    assert [d.get("fill") for d in dots] == ["#2ca02c", "#d62728"]
    assert float(dots[0].get("cx", "0")) > float(dots[1].get("cx", "0"))
