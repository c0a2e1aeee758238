"""`golive capacity --workers 4` against vLLM 0.24 on one H200 (tests/data/vllm-gpu-0.24-h200x1-
workers): what a reader of a bundle relies on, checked on the rows the real run wrote. Every
window's slots are the workers' shares plus the answer probes' lane kept in golive's own
process; every request sent is on one client's row; and the figure `golive.client_headroom`
judged for the window is the worst sending client's, golive's own process among them where
it kept the probes' lane."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from golive.traffic.headroom import HeadroomPolicy
from golive.traffic.load_split import ClientWindow, window_headroom

DATA = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-workers"
RUNS = ("cap-w4", "cap2-w4", "run-w4")


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def _windows(run: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each load window's watchdog row with its clients' rows (in the order both were written:
    one group of client rows per window, ending with golive's own `main` row)."""
    groups: list[list[dict[str, Any]]] = [[]]
    for row in _jsonl(f"{run}-capacity-clients.jsonl"):
        groups[-1].append(row)
        if row["client"] == "main":
            groups.append([])
    windows = [
        w
        for w in _jsonl(f"{run}-capacity-watchdog.jsonl")
        if w["phase"] in ("concurrency", "sustained")
    ]
    assert groups[-1] == []
    assert len(groups) - 1 == len(windows)
    return list(zip(windows, groups[:-1], strict=True))


@pytest.mark.parametrize("run", RUNS)
def test_every_slot_and_request_is_on_a_client_row(run: str) -> None:
    """Shares add up to the window's concurrency and the rows' requests to the window's: the
    sustained window's probe lane is on golive's own row (a quarter of the slots), not lost."""
    lanes = 0
    for window, rows in _windows(run):
        assert [r["client"] for r in rows][-1] == "main"
        assert sum(r["share"] for r in rows) == window["concurrency_cap"], (window, rows)
        assert sum(r["requests"] for r in rows) == window["requests"]
        assert all(r["requests"] == r["sent"] for r in rows)
        main = rows[-1]
        if window["phase"] == "sustained":
            assert main["share"] == window["concurrency_cap"] // 4
            assert main["requests"] > 0
            lanes += 1
        else:
            assert main["share"] == main["requests"] == 0
    assert lanes == 1


@pytest.mark.parametrize("run", RUNS)
def test_the_window_figure_is_the_worst_sending_client(run: str) -> None:
    """The figure `golive.client_headroom` judges for a window is the worst of the clients
    that sent part of it: the workers', and golive's own where it kept the answer probes'
    lane (the sustained window). The capture's watchdog rows were written when golive's row
    counted in every window; its send lags are the same figure either way, and judged again
    by the rule no window of the run was golive's bottleneck, as the verdict said."""
    fields = {f.name for f in dataclasses.fields(ClientWindow)}
    for window, rows in _windows(run):
        senders = [r for r in rows if r["share"] > 0]
        assert len(senders) == len(rows) - (rows[-1]["share"] == 0)
        figures, why = window_headroom(
            [ClientWindow(**{k: v for k, v in r.items() if k in fields}) for r in rows],
            HeadroomPolicy(),
            None,  # no latency to weigh a lag against: the strictest limits
        )
        assert why is None, (window, rows)
        worst_send = max(r["lag_p99_ms"] for r in senders if r["lag_p99_ms"] is not None)
        assert figures.send_lag_p99_ms == pytest.approx(worst_send, abs=5e-4)
        assert window["client"]["send_lag_p99_ms"] == pytest.approx(worst_send, abs=5e-4)
        assert figures.loop_lag_p99_ms == max(r["loop_lag_p99_ms"] for r in senders)
        assert figures.cpu_share == max(r["cpu_share"] for r in senders)
        assert figures.requests == window["requests"]


def test_the_full_programme_with_workers_holds_for_the_random_weights_alone() -> None:
    """`golive run --workers 4` on that engine: the version chain, capacity, cache and
    golive's own checks stand; what holds it is the Agent contract, which random weights must
    fail (the recipe's point), and the ledger balanced over 13,483 requests."""
    verdict = json.loads((DATA / "run-w4-verdict.json").read_text())
    checks = {c["id"]: c for c in verdict["checks"]}
    assert verdict["outcome"] == "hold"
    failed = {i for i, c in checks.items() if c["status"] in ("fail", "error")}
    assert failed == {i for i in failed if i.startswith("agent.")} | {"smoke.tools_structured"}
    for ok in ("environment.vllm_version", "environment.gpus", "golive.client_headroom"):
        assert checks[ok]["status"] == "pass", checks[ok]["summary"]
    assert checks["golive.ledger"]["status"] == "pass"
    assert "13483 sent, 13483 recorded" in checks["golive.ledger"]["summary"]
