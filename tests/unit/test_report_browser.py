"""report.html as a user sees it, rendered in headless Chromium from the recorded demo bundle
(a real CPU vLLM run: ramp c1, c2, c4, sustained at c4): every chart with both axes labelled,
no text drawn over other text, a caption under each chart, the tested steps ticked and marked,
and a screenshot of each section. Chromium comes with `make tools`; without it these tests
fail naming it (tests/helpers/browser.py). Set GOLIVE_REPORT_SHOTS=DIR to keep the
screenshots."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from golive.bundle.layout import EFFECTIVE_CONFIG
from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_ramp, judge_sustained
from golive.checks.capacity.slo import judge_slo
from golive.report.html import render_html
from golive.verdict.document import CheckEntry, VerdictDocument
from tests.helpers.browser import dom, screenshot
from tests.helpers.sections import GOLDEN, golden_config

SECTIONS = ("memory", "latency", "distributions", "sustained", "steps", "cache", "agent")
# the page's text boxes, measured by the browser itself (added to the test copy only)
MEASURE = """<script>
const charts = [...document.querySelectorAll('svg')].map(svg => {
  const figure = svg.closest('figure');
  const caption = figure && figure.querySelector('figcaption');
  return {
    title: svg.getAttribute('aria-label'),
    figure: figure ? figure.id : null,
    caption: caption ? caption.textContent : null,
    texts: [...svg.querySelectorAll('text')].map(t => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, cls: t.getAttribute('class') || '',
              left: r.left, top: r.top, right: r.right, bottom: r.bottom};
    }),
  };
});
const out = document.createElement('pre');
out.id = 'measured';
out.textContent = JSON.stringify(charts);
document.body.appendChild(out);
</script>"""
# met by the sustained c4 window (each p95 bounded by its 1,421 answers): an SLO ceiling of 4
SLO = {"ttft_p95_ms": 5000.0, "itl_p95_ms": 2000.0, "e2e_p95_ms": 10000.0}


def _measured(page: Path) -> list[dict[str, Any]]:
    """Each chart's text boxes as Chromium laid them out."""
    probe = page.with_name("measured.html")
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom(probe), re.S)
    assert found, "the measuring script left nothing in the DOM"
    charts: list[dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return charts


def _overlaps(texts: list[dict[str, Any]]) -> list[str]:
    """Pairs of non-empty text boxes that share more than a pixel's sliver."""
    boxes = [t for t in texts if t["text"].strip() and t["right"] > t["left"]]
    out = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            wide = min(a["right"], b["right"]) - max(a["left"], b["left"])
            tall = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
            if wide > 1 and tall > 1:
                out.append(f"{a['text']!r} over {b['text']!r}")
    return out


def _shots(page: Path, out: Path, sections: tuple[str, ...]) -> list[Path]:
    """A screenshot of each section alone (a copy of the page showing only it)."""
    keep = os.environ.get("GOLIVE_REPORT_SHOTS")
    pngs = []
    for section in sections:
        alone = page.with_name(f"{page.stem}-{section}.html")
        hide = f"body > *:not(#{section}) {{ display: none; }}</style>"
        alone.write_text(page.read_text().replace("</style>", hide, 1))
        png = out / f"{page.stem}-{section}.png"
        screenshot(alone, png, width=1200, height=1400)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / png.name)
        pngs.append(png)
    return pngs


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo bundle's report, rendered from an untouched copy."""
    root = tmp_path_factory.mktemp("report") / "bundle"
    shutil.copytree(GOLDEN, root)
    page = root.parent / "report-demo.html"
    page.write_text(render_html(root, VerdictDocument.read(root)))
    return page


@pytest.fixture(scope="module")
def demo_charts(demo_page: Path) -> list[dict[str, Any]]:
    return _measured(demo_page)


def _by_title(charts: list[dict[str, Any]], title: str) -> dict[str, Any]:
    return next(c for c in charts if c["title"] == title)


def test_every_chart_has_both_axes_labelled_and_a_caption(
    demo_page: Path, demo_charts: list[dict[str, Any]]
) -> None:
    """Every chart names what its x and its y axis show, and a caption under it says what to
    look for; the page itself stays free of scripts and remote assets."""
    page = demo_page.read_text()
    for remote in ('src="http', 'href="http', "url(http", "<link", "<script"):
        assert remote not in page, remote
    assert len(demo_charts) >= 12  # memory 3, concurrency 4, TTFT, ITL, drift, cache 2, agent
    for chart in demo_charts:
        labels = {t["cls"]: t["text"] for t in chart["texts"] if t["cls"] in ("x-label", "y-label")}
        assert labels.get("x-label", "").strip(), f"{chart['title']}: no x axis label"
        assert labels.get("y-label", "").strip(), f"{chart['title']}: no y axis label"
        assert chart["figure"], f"{chart['title']}: not in a figure"
        assert (chart["caption"] or "").startswith("What to look for:"), chart["title"]


def test_no_text_is_drawn_over_other_text(demo_charts: list[dict[str, Any]]) -> None:
    """No tick, label, legend entry or phase name of a chart overlaps another, as Chromium
    lays them out."""
    overlapping = {c["title"]: _overlaps(c["texts"]) for c in demo_charts}
    assert {k: v for k, v in overlapping.items() if v} == {}


def test_charts_by_concurrency_tick_every_tested_step_and_mark_the_knee(
    demo_charts: list[dict[str, Any]],
) -> None:
    """The demo ramped c1, c2, c4: each chart by concurrency ticks exactly those steps, in
    order, one unit on its y axis (requests/s and queue length apart), and names the knee the
    verdict found (capacity.concurrency's ceiling, 4)."""
    units = {}
    for title in (
        "Latency by concurrency",
        "Completed requests per second by concurrency",
        "Output tokens per second by concurrency",
        "Requests waiting in the engine by concurrency",
    ):
        chart = _by_title(demo_charts, title)
        ticks = [t["text"] for t in chart["texts"] if t["cls"] == "x-tick"]
        assert ticks == ["1", "2", "4"], title
        legend = [t["text"] for t in chart["texts"] if not t["cls"]]
        assert any("knee" in text and text.endswith(": 4") for text in legend), legend
        units[title] = next(t["text"] for t in chart["texts"] if t["cls"] == "y-label")
    assert len(set(units.values())) == len(units)  # four quantities, four y axes


def test_distributions_and_drift_show_every_window(demo_charts: list[dict[str, Any]]) -> None:
    """TTFT and ITL are shown per load window, the sustained one included, each with its
    sample count; the sustained window's latency over time names the answers it plots
    (1,421) and its fitted drift."""
    for title in ("Time to first token per load window", "Inter-token latency per load window"):
        ticks = [t["text"] for t in _by_title(demo_charts, title)["texts"] if t["cls"] == "x-tick"]
        assert [t for t in ticks if not t.startswith("n=")] == ["c1", "c2", "c4", "sustained c4"]
        assert len([t for t in ticks if t.startswith("n=")]) == 4
    drift = _by_title(demo_charts, "End-to-end latency over the sustained window")
    legend = [t["text"] for t in drift["texts"] if not t["cls"]]
    assert "answer (1,421)" in legend
    assert any(text.startswith("fitted drift") for text in legend)


def test_a_screenshot_of_every_section(demo_page: Path, tmp_path: Path) -> None:
    """Each section renders to an image of its own (kept with GOLIVE_REPORT_SHOTS)."""
    rendered = dom(demo_page)
    for section in SECTIONS:
        assert f'id="{section}"' in rendered, section
    assert '<table class="steps">' in rendered
    for png in _shots(demo_page, tmp_path, SECTIONS):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000, png


@pytest.mark.tampers_bundle  # the copy's saved config states SLOs the run did not have
def test_stated_slos_are_drawn_and_judged_ceiling_marked(tmp_path: Path) -> None:
    """With SLOs in the saved config, their targets are lines on the latency, TTFT, ITL and
    drift charts, capacity.slo's ceiling is marked beside the knee, the table shows goodput,
    and still no text overlaps."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN, root)
    saved = yaml.safe_load((root / EFFECTIVE_CONFIG).read_text())
    saved["slo"] = SLO
    (root / EFFECTIVE_CONFIG).write_text(yaml.safe_dump(saved, sort_keys=False))
    config = golden_config({f"slo.{k}": v for k, v in SLO.items()})
    reader = BundleReader(root)
    slo = judge_slo(
        reader,
        config,
        judge_ramp(reader, config.capacity),
        judge_sustained(reader, config.capacity),
    )
    ceiling = slo.measurements.get("slo_ceiling")
    assert ceiling == 4, slo.summary
    verdict = VerdictDocument.read(root)
    verdict = verdict.model_copy(update={"checks": [*verdict.checks, CheckEntry.of(slo)]})
    page = tmp_path / "report-slo.html"
    page.write_text(render_html(root, verdict))
    charts = _measured(page)
    expected = {
        "Latency by concurrency": ["SLO: e2e p95 ≤ 10 s", "SLO: TTFT p95 ≤ 5 s"],
        "Time to first token per load window": ["SLO: TTFT p95 ≤ 5000 ms"],
        "Inter-token latency per load window": ["SLO: ITL p95 ≤ 2000 ms"],
        "End-to-end latency over the sustained window": ["SLO: e2e p95 ≤ 10 s"],
    }
    for title, lines in expected.items():
        legend = [t["text"] for t in _by_title(charts, title)["texts"] if not t["cls"]]
        assert set(lines) <= set(legend), (title, legend)
    legend = [t["text"] for t in _by_title(charts, "Latency by concurrency")["texts"]]
    assert f"SLO ceiling (capacity.slo): {ceiling}" in legend
    assert {c["title"]: o for c in charts if (o := _overlaps(c["texts"]))} == {}
    table = re.search(r'<table class="steps">(.*?)</table>', page.read_text(), re.S)
    assert table
    assert "no SLO stated" not in table.group(1)
    _shots(page, tmp_path, ("latency", "distributions", "sustained", "steps"))
