"""`capacity --workers 2` on the real local vLLM: the load windows' engine runs in two worker
processes, and their records come back as one bundle that the ledger balances."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from golive.bundle.layout import CAPACITY_CLIENTS, CAPACITY_WATCHDOG, VERDICT
from golive.bundle.store import read_lines, record_streams
from golive.cli.main import main
from golive.results import Outcome
from golive.target.server import RunningTarget
from golive.traffic.load_split import split
from tests.helpers.scenario import NO_FLOOR_ARGS, small_requests
from tests.helpers.sustained import assert_sustained_read_the_clients


def test_capacity_from_two_worker_processes_is_one_bundle(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """Every window is split over the two workers (one share each, or one worker when the
    window has one slot); every record a worker sent is in the bundle, each worker measured
    its own headroom, and the main process's loop and CPU are in the bundle beside them. The
    answer probes still run: their lane stays in the main process. A worker starved of CPU
    is golive's bottleneck, never the server's."""
    out = tmp_path / "b"
    # the scenario tests' small requests: the default workload's prompts take the 2-core CPU
    # engine 12 s to the first byte, so a 6 s window carried one request
    config = tmp_path / "small.yaml"
    config.write_text(json.dumps({"capacity": small_requests()}))
    code = main(
        [
            "capacity",
            "--target",
            real_target.url,
            "--config",
            str(config),
            "--concurrency",
            "4",
            "--max-context",
            "128",
            "--step-duration",
            "6",
            "--duration",
            "20",
            *NO_FLOOR_ARGS,
            "--workers",
            "2",
            "--out",
            str(out),
        ]
    )
    verdict = json.loads((out / VERDICT).read_text())
    assert code == Outcome(verdict["outcome"]).exit_code  # it completed and decided
    checks = {c["id"]: c for c in verdict["checks"]}
    rows = [json.loads(line) for line in (out / CAPACITY_CLIENTS).read_text().splitlines()]
    workers = [r for r in rows if r["client"] != "main"]
    mains = [r for r in rows if r["client"] == "main"]
    windows = [json.loads(line) for line in (out / CAPACITY_WATCHDOG).read_text().splitlines()]
    load_windows = [w for w in windows if w["phase"] in ("concurrency", "sustained")]
    assert len(mains) == len(load_windows) > 0  # one main row per window
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for w in workers:
        groups.setdefault((w["phase"], w["window_concurrency"]), []).append(w)
    for (phase, level), shares in groups.items():
        # the sustained window's answer probes keep a quarter of its slots in the main process
        per_window = split(level - (level // 4 if phase == "sustained" else 0), 2)
        assert len(shares) % len(per_window) == 0
        assert {w["client"] for w in shares} == {f"worker-{i}" for i in range(len(per_window))}
        assert sorted({w["share"] for w in shares}) == sorted(set(per_window))
    assert all(w["requests"] == w["sent"] > 0 for w in workers)
    assert all(w["loop_lag_p99_ms"] is not None and w["cpu_share"] is not None for w in rows)
    assert all(m["requests"] == 0 for m in mains if m["phase"] == "concurrency")
    records = [
        json.loads(line)
        for phase in ("concurrency", "sustained")
        for path in record_streams(out, f"capacity-{phase}")
        for line in read_lines(path)
    ]
    from_workers = [r for r in records if "@" in r["label"]]
    assert len(from_workers) == sum(w["sent"] for w in workers)
    assert len({r["request_id"] for r in records}) == len(records)
    assert checks["golive.ledger"]["status"] == "pass", checks["golive.ledger"]["summary"]
    headroom = checks["golive.client_headroom"]
    ramp = checks["capacity.concurrency"]
    steps = [w for w in windows if re.fullmatch(r"c\d+(r\d+)?", w["label"])]
    if any(w["client_bottleneck"] for w in steps if w["phase"] == "concurrency"):
        # Two workers, the main process and the engine share 2 cores: on a slow CI host a
        # worker starved at concurrency 2 (send lag 221 ms a request against 71.5 allowed).
        # That window is golive's, not the engine's: the ramp stops there, no_data, hold.
        assert headroom["status"] == "fail", headroom["summary"]
        assert ramp["status"] == "no_data", ramp["summary"]
        assert "the client, not the server, was the bottleneck" in ramp["summary"]
        assert verdict["outcome"] == Outcome.HOLD.value
        assert "max_concurrency" not in verdict["limits"]
        return
    assert ("concurrency", 4) in groups, ramp["summary"]
    assert headroom["status"] == "pass", (headroom["summary"], headroom["measurements"])
    assert {r["label"].split("@")[1] for r in from_workers} == {"worker-0", "worker-1"}
    # the main process's row counts the probes' lane it kept (sustained) and its send lag
    lane = {m["phase"]: m for m in mains}["sustained"]
    assert lane["share"] == 1
    assert lane["requests"] == lane["sent"] > 0
    assert lane["lag_p99_ms"] is not None
    # the probe lane (main process) carried workload requests once the probes were sent
    assert all(r["label"] == "c4" for r in records if "@" not in r["label"])
    under_load = [
        line
        for line in (out / "requests" / "answer-probes.jsonl").read_text().splitlines()
        if not json.loads(line)["label"].endswith("-idle")
    ]
    lane_workload = sum(1 for r in records if "@" not in r["label"])
    assert lane_workload + len(under_load) == lane["requests"]  # the lane: probes, then workload
    probes = checks["capacity.answers_under_load"]
    assert probes["status"] in ("pass", "warn"), probes["summary"]
    assert_sustained_read_the_clients(out, checks["capacity.sustained"])
