"""The Agent section behind a gateway whose facts calls fail (issue 32 §6): a case that could
not be sent keeps its own check, which says what failed — never a verdict without it."""

from __future__ import annotations

from pathlib import Path

from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.select import cases_for
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.profiles import load_profile
from golive.results import CheckResult, Outcome, Status
from tests.helpers.fakes.gateway import stalling_gateway
from tests.helpers.fakes.vllm import FakeState, fake_vllm

CASES = ("one_arg.required", "retry")


async def test_a_models_list_stalled_by_the_gateway_leaves_each_case_no_data_naming_it(
    tmp_path: Path,
) -> None:
    """A gateway that answers golive's preflight and then holds /v1/models (its upstream call
    hanging on a loaded engine) leaves golive no served model to send the cases to: each case's
    own check is there, unproven (no_data), saying /v1/models through the gateway gave no
    answer within the client's first-byte timeout — the verdict is hold and says why, and
    `golive decide` judges the same from the bundle."""
    out = tmp_path / "b"
    async with fake_vllm(FakeState()) as engine, stalling_gateway(engine) as gateway:
        config = load_config(
            None,
            {
                "target.url": gateway,
                "target.engine_url": engine,
                "agent.cases": list(CASES),
                "agent.repeat": 1,
                "client.first_byte_timeout_s": 0.5,
            },
        )
        settings = AgentSettings.from_config(
            config, cases_for(config.agent, load_profile(config.profile))
        )

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_agent(ctx, settings)

        verdict = await judge(config, out, "agent", programme, ("agent",))
    checks = {c.id: c for c in verdict.document.results()}
    shown = {i: f"{c.status.value}: {c.summary}" for i, c in checks.items()}
    for case in CASES:
        check = checks.get(f"agent.{case}")
        assert check is not None, shown
        assert check.status is Status.NO_DATA, shown
        assert "/v1/models" in check.summary, check.summary
        assert "through the gateway" in check.summary, check.summary
        assert "no data for 0.5 s" in check.summary, check.summary  # the timeout that fired
    assert verdict.outcome is Outcome.HOLD
    again = rederive(out)
    assert again.agrees, again.problems
