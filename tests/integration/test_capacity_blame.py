"""Blame the right cause: a server that answers HTTP 500 to every tool-result request at
concurrency 1 has a software defect. `golive capacity` holds, quoting the server and naming
the request class; it never says expand-capacity, and puts no sustained load on it.

The fake stands in for a chat template that breaks on tool results: the real CPU engine
will not fail one request class on demand."""

from __future__ import annotations

from pathlib import Path

from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Outcome
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import FAKE_CAPACITY

SHORT = FAKE_CAPACITY


async def test_http_500_on_tool_results_at_concurrency_1_is_a_defect(tmp_path: Path) -> None:
    """ "Errors at concurrency 1, or in the first step of any ladder, are a software or
    configuration defect: hold, naming the request class and quoting the server. Never
    capacity." (issue 28)"""
    out = tmp_path / "b"
    async with fake_vllm(FakeState(fault="tool_result_500")) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        config = load_config(None, {"target.url": url, **SHORT})
        verdict = await judge(config, out, "capacity", programme, ("capacity",))
    checks = {c["id"]: c for c in verdict.data["checks"]}
    ramp = checks["capacity.concurrency"]
    assert ramp["status"] == "fail"
    assert ramp["measurements"]["classification"] == "first-step-failure"
    assert "at concurrency 1" in ramp["summary"]
    assert "server-error HTTP 500 on a tool-result request" in ramp["summary"]
    assert "KeyError: 'tool_call_id' rendering the chat template" in ramp["summary"]
    assert "on: " in ramp["summary"]
    assert ramp["measurements"]["ceiling"] is None
    fired = {r["rule"] for r in verdict.data["rules_fired"]}
    assert "first-step-failure" in fired
    assert not {"capacity-exhausted", "capacity-unattributed", "capacity-limited"} & fired
    assert verdict.outcome is Outcome.HOLD
    assert "max_concurrency" not in verdict.data["limits"]
    sustained = checks["capacity.sustained"]
    assert sustained["status"] == "no_data"
    assert sustained["summary"].startswith("not run: the ramp found no stable step to sustain")
    assert not (out / "metrics/capacity-sustained.json").exists()
    again = rederive(out)  # decide reads the same defect from the records
    assert again.agrees, again.problems
