"""An engine that dies above a stable ramp step (issue 28: "death after a stable step →
observe-with-limits at that step"). The checklist expands capacity only when the failure
"continues after reasonable context and concurrency controls": the sustained window at the
last stable step is what shows it, so golive measures it once the deployment serves again,
and holds (saying how to measure it) when it does not.

The fake stands in for an engine killed by load and restarted by its platform: the real CPU
engine neither dies at a chosen concurrency nor comes back by itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import Bundle
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Outcome
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import FAKE_CAPACITY

SHORT = {
    **FAKE_CAPACITY,
    # the subject is the death and the restart: a busy test machine's scheduling lag must
    # not take a 1.5 s window as golive's own bottleneck (the fake answers in 50 ms)
    "capacity.client_max_lag_ms": 100.0,
    "capacity.client_max_cpu_share": 1.0,
}


async def _capacity(
    out: Path, restarted: dict[str, Any] | None = None, wait_s: float = 0.0
) -> tuple[Verdict, FakeState]:
    # more than 3 in flight: concurrency 4 only (a request the previous window gave up on
    # may still be in the fake's hands when the next window starts)
    state = FakeState(fault="dies_above", die_above=3, down_s=1.0, **(restarted or {}))
    async with fake_vllm(state) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        settings = {"target.url": url, **SHORT, "capacity.restart_wait_s": wait_s}
        verdict = await judge(
            load_config(None, settings), out, "capacity", programme, ("capacity",)
        )
    return verdict, state


def _checks(verdict: Verdict) -> dict[str, Any]:
    return {c["id"]: c for c in verdict.data["checks"]}


async def test_a_death_above_a_stable_step_restarted_is_a_limit_at_that_step(
    tmp_path: Path,
) -> None:
    """Concurrency 1 and 2 hold, the engine dies at 4 and its platform restarts it within
    capacity.restart_wait_s: the sustained window runs at 2 and holds, so the outcome is
    observe-with-limits at 2 — never expand-capacity (no stated need, no saturation) and
    never hold. The restart is in the bundle and the sustained check says it; decide agrees."""
    out = tmp_path / "b"
    verdict, state = await _capacity(out, wait_s=20)
    assert state.deaths == 1
    checks = _checks(verdict)
    ramp = checks["capacity.concurrency"]
    assert ramp["measurements"]["classification"] == "limit-traffic", ramp["summary"]
    assert ramp["measurements"]["ceiling"] == 2
    termination = json.loads((out / "memory/termination.json").read_text())
    assert (termination["phase"], termination["concurrency"]) == ("concurrency", 4)
    restart = json.loads((out / "memory/restart.json").read_text())
    assert restart["served_again"] is True
    assert "platform restarted" in restart["how"]
    sustained = checks["capacity.sustained"]
    assert sustained["status"] == "pass", sustained["summary"]
    assert sustained["measurements"]["concurrency"] == 2
    assert sustained["measurements"]["after_restart"] is True
    assert "measured after the engine's restart" in sustained["summary"]
    assert verdict.outcome is Outcome.OBSERVE_WITH_LIMITS, verdict.data["rules_fired"]
    assert verdict.data["limits"]["max_concurrency"] == 2
    fired = {r["rule"] for r in verdict.data["rules_fired"]}
    assert "capacity-limited" in fired
    assert not {"capacity-exhausted", "capacity-unattributed"} & fired
    phases = [p["phase"] for p in json.loads((out / "metrics/capacity-phases.json").read_text())]
    assert phases == ["long_input", "concurrency", "restart", "sustained"]
    again = rederive(out)
    assert again.agrees, again.problems


async def test_a_death_above_a_stable_step_not_restarted_holds_and_says_how(
    tmp_path: Path,
) -> None:
    """The same death with no restart wait: the sustained window at 2 was never measured, so
    the verdict holds (no measurement, no pass) and the sustained check says how to measure
    it; no limit is stated as if it had been."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out)
    checks = _checks(verdict)
    assert checks["capacity.concurrency"]["measurements"]["ceiling"] == 2
    sustained = checks["capacity.sustained"]
    assert sustained["status"] == "no_data"
    assert "not run: the engine terminated earlier" in sustained["summary"]
    assert "--restart-wait" in sustained["summary"]
    assert not (out / "memory/restart.json").exists()
    assert verdict.outcome is Outcome.HOLD
    again = rederive(out)
    assert again.agrees, again.problems


async def test_a_platform_that_never_restarts_is_named(tmp_path: Path) -> None:
    """A restart wait that runs out: the attempt is recorded and the sustained check names
    it; the verdict holds."""
    out = tmp_path / "b"
    state = FakeState(fault="dies_above", die_above=3, down_s=3600.0)
    async with fake_vllm(state) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        config = load_config(None, {"target.url": url, **SHORT, "capacity.restart_wait_s": 2.5})
        verdict = await judge(config, out, "capacity", programme, ("capacity",))
    restart = json.loads((out / "memory/restart.json").read_text())
    assert restart["served_again"] is False
    assert "did not answer OK within 2.5 s" in restart["failure"]
    sustained = _checks(verdict)["capacity.sustained"]
    assert sustained["status"] == "no_data"
    assert "it did not serve again" in sustained["summary"]
    assert verdict.outcome is Outcome.HOLD


async def test_a_death_that_continues_at_the_limit_after_the_restart_holds(
    tmp_path: Path,
) -> None:
    """Restarted, the engine dies again in the sustained window at 2: both deaths are in the
    bundle (the first record is never overwritten), and the failure continues under the
    limit its death set, with no saturation behind it: no lower limit is known to hold, so
    the verdict holds (failure-continues) — neither a limit at 1 nor expand-capacity."""
    out = tmp_path / "b"
    restarted = {"die_again_above": 1}
    verdict, state = await _capacity(out, restarted, wait_s=20)
    assert state.deaths == 2
    first = json.loads((out / "memory/termination.json").read_text())
    assert (first["phase"], first["concurrency"]) == ("concurrency", 4)
    again = json.loads((out / "memory/termination-after-restart.json").read_text())
    assert (again["phase"], again["concurrency"]) == ("sustained", 2)
    sustained = _checks(verdict)["capacity.sustained"]
    assert sustained["measurements"]["classification"] == "failure-continues"
    assert "the engine terminated under sustained load at concurrency 2" in sustained["summary"]
    assert "after the engine was restarted" in sustained["summary"]
    assert verdict.outcome is Outcome.HOLD
    assert "failure-continues" in {r["rule"] for r in verdict.data["rules_fired"]}
    assert verdict.data["tested"]["sustained_s"] is None  # it did not hold
    assert rederive(out).agrees


async def test_a_restart_that_cannot_serve_holds(tmp_path: Path) -> None:
    """Restarted, /health answers 200 but every chat request fails: the failure continues at
    the ramp's last stable step (hold), never a limit at half of it."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out, {"broken_after_restart": True}, wait_s=20)
    sustained = _checks(verdict)["capacity.sustained"]
    assert sustained["measurements"]["classification"] == "failure-continues"
    assert verdict.outcome is Outcome.HOLD
    assert "max_concurrency" not in verdict.data["limits"] or (
        verdict.data["limits"]["max_concurrency"] == 2  # the ramp's, never a lower guess
    )
    assert rederive(out).agrees


async def test_a_restart_as_another_version_is_not_measured(tmp_path: Path) -> None:
    """The deployment that serves again is another vLLM version: it is not the deployment
    the ramp measured, so the sustained window is not run on it; restart.json says why and
    the verdict holds."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out, {"version_after_restart": "0.99.0"}, wait_s=20)
    restart = json.loads((out / "memory/restart.json").read_text())
    assert restart["served_again"] is False
    assert "another deployment: vLLM '0.99.0', was '0.32.0'" in restart["failure"]
    sustained = _checks(verdict)["capacity.sustained"]
    assert sustained["status"] == "no_data"
    assert "another deployment" in sustained["summary"]
    assert verdict.outcome is Outcome.HOLD
    assert rederive(out).agrees


@pytest.mark.tampers_bundle
async def test_deleting_the_death_records_does_not_lift_the_hold(tmp_path: Path) -> None:
    """A reviewer deletes both termination records of the continuing failure and reseals:
    the ramp's rows still say the engine died, so the missing record is named, and the
    restart still shows in restart.json: decide holds, never a limit to go live with."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out, {"die_again_above": 1}, wait_s=20)
    assert verdict.outcome is Outcome.HOLD
    for name in ("termination.json", "termination-after-restart.json"):
        (out / "memory" / name).unlink()
    Bundle(out).seal()
    again = rederive(out)
    assert again.decision.outcome is Outcome.HOLD
    assert any(
        "termination.json (the death's record) is missing" in p for p in again.problems
    ) or any("termination.json (the death's record) is missing" in c.summary for c in again.checks)


async def test_a_death_is_shown_by_the_failed_health_answer_that_found_it(tmp_path: Path) -> None:
    """The death record names the failed /health answer saved in
    requests/capacity-health.jsonl; decide reads both."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out, wait_s=20)
    assert verdict.outcome is Outcome.OBSERVE_WITH_LIMITS
    termination = json.loads((out / "memory/termination.json").read_text())
    health = [
        json.loads(x) for x in (out / "requests/capacity-health.jsonl").read_text().splitlines()
    ]
    named = [h for h in health if h["request_id"] == termination["health_request_id"]]
    assert len(named) == 1
    assert named[0]["http_status"] != 200
    assert rederive(out).agrees


@pytest.mark.tampers_bundle
async def test_a_death_record_no_failed_health_answer_shows_is_not_believed(
    tmp_path: Path,
) -> None:
    """A death record written into a bundle (here: the honest one, its failed /health answer
    deleted) could turn a stall or a failing step into a limit at the step below; with no
    failed answer behind it every capacity check it touches is no_data, naming it: hold."""
    out = tmp_path / "b"
    verdict, _ = await _capacity(out, wait_s=20)
    assert verdict.outcome is Outcome.OBSERVE_WITH_LIMITS
    (out / "requests/capacity-health.jsonl").unlink()
    Bundle(out).seal()
    again = rederive(out)
    assert again.decision.outcome is Outcome.HOLD
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status.value == "no_data"
    assert "no failed /health answer in requests/capacity-health.jsonl shows it" in ramp.summary
