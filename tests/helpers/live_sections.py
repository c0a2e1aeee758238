"""One section run against a real local target, as the target tier calls it: the capacity
section in-process with small sizes, and `golive cache` as a user starts it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.cli.main import main
from golive.config_sources import load_config
from golive.evidence.startup_log import parse_startup_log
from golive.orchestration.pipeline import Verdict, judge
from golive.results import CheckResult
from golive.target.server import RunningTarget
from tests.helpers.scenario import SMALL_REQUESTS

# 30 s of sustained load: at least ~30 completions even at concurrency 1 here, the fewest a
# drift may set a limit on (fewer, and a drift is no_data); the answer probes are the demo's.
SMALL = {
    **SMALL_REQUESTS,
    "capacity.step_duration_s": 8,
    "capacity.duration_s": 30,
    "capacity.answer_probes": False,
}


async def capacity_section(
    target: RunningTarget,
    out: Path,
    settings: Mapping[str, Any],
    collected: Callable[[], None] | None = None,
) -> Verdict:
    """The capacity section on `target` with the small sizes above and `settings`;
    `collected` is called once its load has ended, before the judgement."""
    config = load_config(None, {"target.url": target.url, **SMALL, **settings})
    inputs = CapacityInputs(
        target_pid=target.pid,
        startup=parse_startup_log(target.log_path.read_text()),
        load_curve=target.load_curve,
    )

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        try:
            return await run_capacity(ctx, inputs)
        finally:
            if collected is not None:
                collected()

    return await judge(config, out, "capacity", programme, ("capacity",))


def capacity_checks(verdict: Verdict) -> dict[str, Any]:
    """The section's checks by id, as verdict.json lists them."""
    return {c["id"]: c for c in verdict.data["checks"]}


async def golive_cache(target: RunningTarget, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """`golive cache` with 3 warm repeats and 2 cold samples: its exit code and verdict."""
    code = await asyncio.to_thread(
        main,
        [
            "cache",
            "--target",
            target.url,
            "--out",
            str(out),
            "--warm-repeats",
            "3",
            "--cold-samples",
            "2",
            "--json",
            *extra,
        ],
    )
    return code, json.loads((out / "verdict.json").read_text())
