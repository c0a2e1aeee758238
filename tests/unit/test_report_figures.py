"""The report's figures say what the judgement read: the drift drawn over the sustained window
is the one capacity.sustained judged, the per-step table repeats report.md's figures, and a
GPU's memory is drawn against its headroom line."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from golive.bundle.layout import CAPACITY_STEPS, GPU_DEVICES, MEMORY_CURVE
from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_sustained
from golive.checks.capacity.windows import trend
from golive.report.figures import LoadWindows
from golive.report.figures_time import memory_figures, sustained_points
from golive.report.html import render_html
from golive.report.markdown import latency_by_step
from golive.report.step_table import step_rows
from golive.verdict.document import VerdictDocument
from tests.helpers.sections import GOLDEN, golden_config

SVG = "{http://www.w3.org/2000/svg}"


def test_the_drawn_drift_is_the_one_capacity_sustained_judged() -> None:
    """The demo's sustained window: one point per answer (1,421), and the fit over them has
    the slope and interval capacity.sustained's judge finds (judged here, not read from the
    sealed verdict, so a change to the fit's interval moves both alike)."""
    reader = BundleReader(GOLDEN)
    points = sustained_points(reader)
    judged = judge_sustained(reader, golden_config().capacity).measurements
    assert len(points) == judged["completed"] == 1421
    fit = trend(points)
    assert fit is not None
    assert round(fit.slope, 6) == judged["latency_slope_s_per_s"]
    assert round(fit.low, 6) == judged["latency_slope_ci_low"]
    assert round(fit.high, 6) == judged["latency_slope_ci_high"]


def test_the_table_repeats_report_md_per_step_figures() -> None:
    """Each ramp step's requests, e2e p50 and bounded p95s read the same in the HTML table as
    in report.md's per-step table; the sustained window has a row of its own."""
    reader = BundleReader(GOLDEN)
    verdict = VerdictDocument.read(GOLDEN)
    rows = step_rows(reader, LoadWindows.read(reader, verdict))
    markdown = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in latency_by_step(reader.jsonl(CAPACITY_STEPS))
        if re.match(r"\| \d", line)
    ]
    assert len(markdown) == 3
    assert [list(r[1:6]) for r in rows[:3]] == markdown
    assert rows[-1][0] == "sustained c4"
    assert rows[-1][2] == "1421"
    assert all(cell != "n/a" for cell in rows[-1][:9])  # goodput: no SLO stated


def test_gpu_memory_is_drawn_against_its_headroom_line(tmp_path: Path) -> None:
    """A GPU of 80,000 MiB with the 10% headroom rule: its curve is drawn with a line at its
    memory and one at 72,000 MiB, both named, and the caption says what to look for."""
    (tmp_path / "memory").mkdir()
    rows = ["t_s,phase,gpu0_used_mib,kv_cache_usage_perc"]
    rows += [f"{t},sustained,{70_000 + 100 * t},0.5" for t in range(12)]
    (tmp_path / MEMORY_CURVE).write_text("\n".join(rows) + "\n")
    inventory = [{"index": 0, "name": "H100", "uuid": "GPU-0", "memory_total_mib": 80_000}]
    (tmp_path / GPU_DEVICES).write_text(json.dumps(inventory))
    verdict = VerdictDocument.read(GOLDEN)  # capacity.memory: min_memory_headroom 0.1
    figures = {f.key: f for f in memory_figures(BundleReader(tmp_path), verdict)}
    gpu = figures["gpu0-memory"]
    assert gpu.caption.startswith("What to look for:")
    root = ET.fromstring(gpu.svg)
    refs = [line for line in root.iter(f"{SVG}line") if line.get("class") == "ref"]
    assert [r.findtext(f"{SVG}title") for r in refs] == [
        "GPU0 memory 80,000 MiB",
        "headroom line: 10% of it spare",
    ]
    full, limit = (float(r.get("y1", "0")) for r in refs)
    assert full < limit  # the memory's line above the headroom line
    (curve,) = root.iter(f"{SVG}polyline")
    highest = min(float(p.split(",")[1]) for p in curve.get("points", "").split())
    assert limit < highest  # 71,100 MiB at most: under the 72,000 MiB line


@pytest.mark.tampers_bundle
def test_figures_that_are_not_numbers_are_not_drawn_nor_shown(tmp_path: Path) -> None:
    """A step row holding NaN and Infinity (as a hand-edited JSON line may): the HTML report
    renders, with neither drawn nor printed, and large figures tick in k/M/G inside the
    margin."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    steps = root / CAPACITY_STEPS
    rows = [json.loads(line) for line in steps.read_text().splitlines()]
    rows[1]["e2e_p95_s"] = float("nan")
    rows[1]["throughput_rps"] = float("inf")
    rows[2]["max_waiting"] = 3e9
    steps.write_text("".join(json.dumps(row) + "\n" for row in rows))
    page = render_html(root, VerdictDocument.read(root))
    assert not re.search(r"\b(nan|inf|NaN|Infinity)\b", page)
    assert re.search(r">3G<", page)
