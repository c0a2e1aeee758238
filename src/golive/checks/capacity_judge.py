"""The capacity checks judged from the bundle alone (issue 18): the concurrency ramp from
`metrics/capacity-steps.jsonl`, golive's own headroom from `metrics/capacity-watchdog.jsonl`.
The run calls these on the bundle it is writing; `golive decide` calls them again."""

from __future__ import annotations

import dataclasses
from typing import Any

from golive.bundle import BundleReader
from golive.checks.capacity import classified
from golive.checks.capacity_load import STEPS, WATCHDOG
from golive.checks.capacity_rules import (
    StabilityPolicy,
    StepStats,
    api_server_bound,
    classify_concurrency,
)
from golive.config import CapacityConfig
from golive.results import CheckResult
from golive.traffic.headroom import headroom_check

TERMINATION = "memory/termination.json"


def judge_ramp(evidence: BundleReader, config: CapacityConfig) -> CheckResult:
    """`capacity.concurrency`: each ramp step's stability, the knee and the ceiling."""
    policy = StabilityPolicy(max_queue_s=config.max_queue_s, max_queue_share=config.max_queue_share)
    steps = [StepStats.from_json(row) for row in evidence.jsonl(STEPS)]
    result = classify_concurrency(steps, policy)
    measurements: dict[str, Any] = {"steps": len(steps), "ceiling": result.ceiling}
    for s in steps:
        measurements[f"c{s.concurrency}_rps"] = round(s.throughput_rps, 3)
        measurements[f"c{s.concurrency}_e2e_p95_s"] = s.e2e_p95_s
        measurements[f"c{s.concurrency}_queue_mean_s"] = s.queue_mean_s
        measurements[f"c{s.concurrency}_max_waiting"] = s.max_waiting
        measurements[f"c{s.concurrency}_engine_held"] = (
            None if s.engine_held is None else round(s.engine_held, 2)
        )
    frontend = next((f for s in steps if (f := api_server_bound(s)) is not None), None)
    if frontend is not None:
        measurements["api_server_bound"] = frontend
        if frontend not in result.reason:
            result = dataclasses.replace(result, reason=f"{result.reason}; {frontend}")
    evidence_paths = ["requests/capacity-concurrency.jsonl", STEPS, "memory/capacity.csv"]
    if evidence.text(TERMINATION) is not None:
        evidence_paths.append(TERMINATION)
    return classified("capacity.concurrency", result, measurements, evidence_paths)


def judge_headroom(evidence: BundleReader) -> CheckResult:
    """`golive.client_headroom`: every load window's own figures for golive."""
    return headroom_check(evidence.jsonl(WATCHDOG))
