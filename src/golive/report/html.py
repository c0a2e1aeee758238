"""report.html: one self-contained page (inline SVG, inline CSS, no scripts, no network) from
what the bundle holds: the verdict, the chain, memory and queue curves per phase, latency,
throughput and queueing by concurrency with the knee and SLO lines, TTFT and ITL per load
window, latency over the sustained window with its drift fit, the per-step table, the cache
steps and the Agent pass rates with their intervals. Every chart has a caption saying what to
read from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from golive.bundle.layout import (
    CACHE_STEPS,
    CAPACITY_REQUEST_JSON,
    CHAIN,
    SIGNOFF_JSON,
)
from golive.bundle.store import BundleReader, locate
from golive.checks.agent.results import pass_rate
from golive.report.figures import Figure, LoadWindows, concurrency_figures, distribution_figures
from golive.report.figures_time import memory_figures, sustained_figures
from golive.report.markdown import chain_rows, scope_line
from golive.report.plots_bars import bar_chart, interval_chart
from golive.report.step_table import HEADERS, step_rows
from golive.results import CheckClass
from golive.verdict.document import VerdictDocument, tested_sentence

_OUTCOME_COLOUR = {
    "go-live": "#1a7f37",
    "section-passed": "#0969da",
    "observe-with-limits": "#9a6700",
    "hold": "#cf222e",
    "expand-capacity": "#bc4c00",
    "rebuild": "#8250df",
}
_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("golive.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.ChainableUndefined,
)


def render_html(root: Path, verdict: VerdictDocument) -> str:
    chain = _json(locate(root, CHAIN))
    signoff = _json(root / SIGNOFF_JSON)
    reader = BundleReader(root)
    windows = LoadWindows.read(reader, verdict)
    memory = memory_figures(reader, verdict)
    return _ENV.get_template("report.html.j2").render(
        v=verdict,
        colour=_OUTCOME_COLOUR.get(verdict.outcome, "#555"),
        chain_rows=chain_rows(chain) if isinstance(chain, dict) else [],
        memory_figures=memory,
        gpu_memory_shown=any(f.key.startswith("gpu") for f in memory),
        latency_figures=concurrency_figures(windows),
        distribution_figures=distribution_figures(windows),
        sustained_figures=sustained_figures(reader, windows),
        step_headers=HEADERS,
        step_rows=step_rows(reader, windows),
        slo_stated=windows.slo.stated,
        cache_figures=cache_charts(locate(root, CACHE_STEPS)),
        agent_figures=agent_chart(verdict),
        signoff=signoff if isinstance(signoff, dict) else None,
        scope=scope_line(verdict),
        tested=tested_sentence(verdict.tested),
        request=request
        if isinstance(request := _json(root / CAPACITY_REQUEST_JSON), dict)
        else None,
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def cache_charts(path: Path) -> list[Figure]:
    steps = _jsonl(path)
    if not steps:
        return []
    names = [str(s.get("step")) for s in steps]
    tokens = {
        "prompt tokens": [s.get("prompt_tokens") for s in steps],
        "cached (API)": [s.get("cached_tokens") for s in steps],
        "hits (engine counter)": [s.get("d_hits") for s in steps],
    }
    ttft = {"TTFT (s)": [s.get("ttft_s") for s in steps]}
    axis = "cache protocol step (cold, warm, controls)"
    charts = [
        Figure(
            "cache-tokens",
            bar_chart("Prompt tokens and reuse per step", (axis, "tokens"), names, tokens),
            "What to look for: warm steps should show most of the prompt cached, by the API "
            "and by the engine's own hit counter alike; cold and control steps (a changed "
            "prefix) should show none.",
        ),
        Figure(
            "cache-ttft",
            bar_chart("Time to first token per step", (axis, "seconds"), names, ttft),
            "What to look for: warm steps answer sooner than cold ones: the reuse is real "
            "only if it saves prefill time.",
        ),
    ]
    return [c for c in charts if c.svg]


def agent_chart(verdict: VerdictDocument) -> list[Figure]:
    rows = []
    for check in verdict.checks:
        rate = pass_rate(check.measurements)
        if check.check_class is CheckClass.AGENT and rate is not None:
            rows.append(
                (
                    check.id.removeprefix("agent."),
                    float(rate.rate),
                    float(rate.low or 0.0),
                    float(rate.high or 1.0),
                )
            )
    svg = interval_chart("Pass rate per case (Wilson 95% interval)", rows)
    caption = (
        "What to look for: a case whose interval reaches below the policy's pass rate is "
        "not proven, even when its dot is high; a red dot is a case that mostly failed."
    )
    return [Figure("agent-pass-rates", svg, caption)] if svg else []
