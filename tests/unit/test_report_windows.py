"""Issue 17 done-when: the report shows that every capacity window carried its load."""

from __future__ import annotations

import json
from pathlib import Path

from golive.report.markdown import render_markdown
from golive.verdict.document import VerdictDocument
from tests.helpers.verdicts import verdict

TIER = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x2-tier"


def _windows() -> list[dict[str, object]]:
    return [json.loads(x) for x in (TIER / "capacity-watchdog.jsonl").read_text().splitlines()]


def test_the_h200_run_reports_every_window_loaded_for_its_duration() -> None:
    """The H200 run's report says every load window carried its load for the whole duration."""
    windows = _windows()
    text = render_markdown(VerdictDocument.read(TIER), None, windows)
    assert (
        f"{len(windows)} of {len(windows)} window(s) carried their load for the whole duration."
        in text
    )
    assert "| sustained | 16 | 60.0 |" in text
    assert text.count("| duration |") == len(windows)


def test_a_window_cut_short_is_named_in_the_report() -> None:
    """The first H200 run: the sustained window hit its request cap after ~25 of 60 s."""
    windows = _windows()
    cut = {**windows[-1], "stopped_by": "request_cap", "wall_s": 25.1}
    text = render_markdown(verdict("hold"), None, [*windows[:-1], cut])
    assert f"{len(windows) - 1} of {len(windows)} window(s)" in text
    assert "ended early: sustained c16 (request_cap)" in text


def test_golive_own_figures_stand_beside_each_window() -> None:
    """golive's own lag and CPU stand beside each window, and a starved window is said not to be
    judged."""
    windows = _windows()
    starved = {
        **windows[-1],
        "client": {
            "send_lag_mean_ms": 18.4,
            "send_lag_p99_ms": 41.2,
            "loop_lag_p99_ms": 230.5,
            "cpu_share": 0.97,
        },
        "client_bottleneck": "the client, not the server, was the bottleneck: golive used 97%",
    }
    text = render_markdown(verdict("hold"), None, [*windows[:-1], starved])
    assert "| 18.4 / 41.2, 230.5 | 97% |" in text
    assert "Not judged: the client, not the server, was the bottleneck" in text
    assert text.count("| n/a | n/a |") == len(windows) - 1  # captured before the figures


def test_each_ramp_p95_stands_with_its_count_and_bound() -> None:
    """A p95 of 15 requests (a CPU ramp step) is marked as no bound; one of 313 (the H200's
    first step) carries its 95% upper bound."""
    small = {
        "concurrency": 2,
        "completed": 15,
        "e2e_p50_s": 0.9,
        "e2e_p95_s": 0.95,
        "e2e_samples": 15,
        "e2e_p95_upper_s": None,
        "ttft_p95_s": 0.7,
        "ttft_samples": 15,
        "ttft_p95_upper_s": None,
    }
    large = {
        **small,
        "concurrency": 16,
        "completed": 313,
        "e2e_samples": 313,
        "e2e_p95_upper_s": 0.981,
        "ttft_samples": 313,
        "ttft_p95_upper_s": 0.74,
    }
    text = render_markdown(verdict("hold"), None, [], [small, large])
    assert "## Latency by ramp step" in text
    assert (
        "| 2 | 15 | 0.900 | 0.950 (n=15 < 59: not a bound) | 0.700 (n=15 < 59: not a bound) |"
        in text
    )
    assert "| 16 | 313 | 0.900 | 0.950 (≤ 0.981, n=313) | 0.700 (≤ 0.740, n=313) |" in text
    # a bundle from before the counts were kept says so rather than guessing
    old = [json.loads(x) for x in (TIER / "capacity-steps.jsonl").read_text().splitlines()]
    assert "(samples not recorded)" in render_markdown(verdict("hold"), None, [], old)
