"""Issue 17 done-when: the report shows that every capacity window carried its load."""

from __future__ import annotations

import json
from pathlib import Path

from golive.report.markdown import render_markdown

TIER = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x2-tier"


def _windows() -> list[dict[str, object]]:
    return [json.loads(x) for x in (TIER / "capacity-watchdog.jsonl").read_text().splitlines()]


def test_the_h200_run_reports_every_window_loaded_for_its_duration() -> None:
    verdict = json.loads((TIER / "verdict.json").read_text())
    windows = _windows()
    text = render_markdown(verdict, None, windows)
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
    text = render_markdown({"outcome": "hold"}, None, [*windows[:-1], cut])
    assert f"{len(windows) - 1} of {len(windows)} window(s)" in text
    assert "ended early: sustained c16 (request_cap)" in text


def test_golive_own_figures_stand_beside_each_window() -> None:
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
    text = render_markdown({"outcome": "hold"}, None, [*windows[:-1], starved])
    assert "| 18.4 / 41.2, 230.5 | 97% |" in text
    assert "Not judged: the client, not the server, was the bottleneck" in text
    assert text.count("| n/a | n/a |") == len(windows) - 1  # captured before the figures
