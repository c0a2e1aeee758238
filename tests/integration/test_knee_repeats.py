"""A throughput knee is measured again before it becomes a limit (issue 28 §3), end to end:
`golive capacity` on a server with a known knee (the fake: every request takes 20 ms up to
two in flight and proportionally longer past it). The ramp sees a candidate knee at 4, runs
the two steps around it again (alternating order), and sets the limit at 2 with the interval
it was judged on; `golive decide` re-derives it from the repeats' records (tests/conftest.py).

The fake stands in for a knee that reproduces: the real CPU engine's knee moves between runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.results import CheckResult
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import NO_FLOOR

SHORT = {
    **NO_FLOOR,
    "capacity.concurrency": 8,
    "capacity.step_duration_s": 3.0,  # ~200 answers a window: enough for repeats to count
    "capacity.calibration_s": 1.0,
    "capacity.duration_s": 2.0,
    "capacity.max_context": 128,
    "capacity.answer_probes": False,
    # the subject is the knee: a busy test machine's scheduling lag must not make a window
    # golive's own (a suite run beside another once stopped the ramp before the repeats)
    "capacity.client_max_lag_ms": 100.0,
    "capacity.client_max_cpu_share": 1.0,
}


async def test_a_known_knee_is_repeated_and_set_with_its_interval(tmp_path: Path) -> None:
    """Knee at 2 in flight: the ramp repeats 2 and 4 (upper first, then lower first) and limits traffic to 2, citing the interval over three windows a side."""
    out = tmp_path / "b"
    async with fake_vllm(FakeState(fault="knee")) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        config = load_config(None, {"target.url": url, **SHORT})
        verdict = await judge(config, out, "capacity", programme, ("capacity",))
    ramp = next(c for c in verdict.data["checks"] if c["id"] == "capacity.concurrency")
    repeats = [
        json.loads(line)
        for line in (out / "metrics/capacity-knee-repeats.jsonl").read_text().splitlines()
    ]
    # knee_repeats 3: two more windows at 4 and at 2, the first pair upper level first
    assert [r["label"] for r in repeats] == ["c4r1", "c2r1", "c2r2", "c4r2"]
    assert (out / "metrics/capacity-c4r1-before.prom").is_file()
    assert ramp["measurements"]["classification"] == "limit-traffic", ramp["summary"]
    assert ramp["measurements"]["ceiling"] == 2
    assert "over 3 and 3 windows, the server's run-to-run spread included" in ramp["summary"]
    assert ramp["measurements"]["c4_repeat_rps"].count(",") == 1
