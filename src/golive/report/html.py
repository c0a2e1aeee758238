"""report.html: one self-contained page (inline SVG, inline CSS, no scripts, no network) from
what the bundle holds: the verdict, the chain, memory and queue curves per phase, latency by
concurrency, the cache steps and the Agent pass rates with their intervals."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import jinja2

from golive.bundle.layout import (
    CACHE_STEPS,
    CAPACITY_REQUEST_JSON,
    CAPACITY_STEPS,
    CHAIN,
    MEMORY_CURVE,
    SIGNOFF_JSON,
)
from golive.bundle.store import locate
from golive.report.markdown import chain_rows, scope_line
from golive.report.plots import bar_chart, interval_chart, line_chart
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
    return _ENV.get_template("report.html.j2").render(
        v=verdict,
        colour=_OUTCOME_COLOUR.get(verdict.outcome, "#555"),
        chain_rows=chain_rows(chain) if isinstance(chain, dict) else [],
        memory_svgs=memory_charts(locate(root, MEMORY_CURVE)),
        latency_svgs=latency_charts(locate(root, CAPACITY_STEPS)),
        cache_svgs=cache_charts(locate(root, CACHE_STEPS)),
        agent_svg=agent_chart(verdict),
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


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def memory_charts(path: Path) -> list[str]:
    """Memory (MB), KV-cache usage and running/waiting requests against time, phases shaded."""
    try:
        with path.open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        return []
    if not rows:
        return []
    x = [_number(r.get("t_s")) or 0.0 for r in rows]
    phases = [r.get("phase") or "" for r in rows]
    columns = [c for c in rows[0] if c not in ("t_s", "phase")]

    def series(names: list[str]) -> dict[str, list[float | None]]:
        return {n: [_number(r.get(n)) for r in rows] for n in names}

    memory = [c for c in columns if any(k in c for k in ("mb", "mib", "memory", "rss"))]
    kv = [c for c in columns if "kv_cache" in c]
    queue = [c for c in columns if c in ("num_requests_running", "num_requests_waiting")]
    charts = [
        line_chart("Memory by phase", "time (s)", "MB", x, series(memory), phases),
        line_chart("KV cache usage", "time (s)", "fraction", x, series(kv), phases),
        line_chart(
            "Running and waiting requests", "time (s)", "requests", x, series(queue), phases
        ),
    ]
    return [c for c in charts if c]


def latency_charts(path: Path) -> list[str]:
    steps = _jsonl(path)
    if not steps:
        return []
    x = [float(s.get("concurrency") or 0) for s in steps]
    latency = {
        name: [s.get(key) for s in steps]
        for name, key in (
            ("e2e p50", "e2e_p50_s"),
            ("e2e p95", "e2e_p95_s"),
            ("TTFT p95", "ttft_p95_s"),
            ("queue mean", "queue_mean_s"),
        )
    }
    throughput = {
        "requests/s": [s.get("throughput_rps") for s in steps],
        "max waiting": [s.get("max_waiting") for s in steps],
    }
    charts = [
        line_chart("Latency percentiles by concurrency", "concurrency", "seconds", x, latency),
        line_chart("Throughput and queue by concurrency", "concurrency", "value", x, throughput),
    ]
    return [c for c in charts if c]


def cache_charts(path: Path) -> list[str]:
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
    charts = [
        bar_chart("Prompt tokens and reuse per step", "tokens", names, tokens),
        bar_chart("Time to first token per step", "seconds", names, ttft),
    ]
    return [c for c in charts if c]


def agent_chart(verdict: VerdictDocument) -> str:
    rows = []
    for check in verdict.checks:
        m = check.measurements
        rate = m.get("pass_rate")
        if check.check_class is CheckClass.AGENT and isinstance(rate, (int, float)):
            rows.append(
                (
                    check.id.removeprefix("agent."),
                    float(rate),
                    float(m.get("wilson_low") or 0.0),
                    float(m.get("wilson_high") or 1.0),
                )
            )
    return interval_chart("Pass rate per case (Wilson 95% interval)", rows)
