"""`golive capacity` on real vLLM servers: a healthy envelope, a server capped at one
sequence and a short max_model_len, and an engine killed in the middle of phase 3."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from golive.bundle.layout import CAPACITY_WATCHDOG
from golive.bundle.store import Bundle
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.evidence.sampling import process_tree
from golive.evidence.startup_log import parse_startup_log
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Outcome
from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from tests.helpers.gil import hold_the_gil
from tests.helpers.scenario import SMALL_REQUESTS, golive_run, rules

# 30 s of sustained load: at least ~30 completions even at concurrency 1 here, the fewest a
# drift may set a limit on (fewer, and a drift is no_data); the answer probes are the demo's.
SMALL = {
    **SMALL_REQUESTS,
    "capacity.step_duration_s": 8,
    "capacity.duration_s": 30,
    "capacity.answer_probes": False,
}


async def _capacity(target: RunningTarget, out: Path, **settings: Any) -> Verdict:
    config = load_config(None, {"target.url": target.url, **SMALL, **settings})
    inputs = CapacityInputs(
        target_pid=target.pid,
        startup=parse_startup_log(target.log_path.read_text()),
        load_curve=target.load_curve,
    )

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_capacity(ctx, inputs)

    return await judge(config, out, "capacity", programme, ("capacity",))


def _checks(verdict: Verdict) -> dict[str, Any]:
    return {c["id"]: c for c in verdict.data["checks"]}


async def test_default_envelope_is_stable(real_target: RunningTarget, tmp_path: Path) -> None:
    """All four phases complete; the ramp is stable to 2; curves and long-input steps are
    saved. The sustained phase (30 s, lengthened up to 60 s until it holds the 30 answers a
    drift is judged on) runs on a shared 2-core box, where the engine's latency
    wanders by tens of percent (runs here measured -29 %, +24 %, +60 %): it must pass, or name
    a drift its own measurements show on both measures (fit and thirds), never a bare limit.
    A CPU box has no GPU to measure memory headroom on: capacity.memory is no_data saying so,
    so even a stable section is observe-with-limits (a named gap), never section-passed."""
    verdict = await _capacity(
        real_target, tmp_path / "b", **{"capacity.concurrency": 2, "capacity.max_context": 512}
    )
    checks = _checks(verdict)
    # golive decide reads every window again from its records, scrapes and curve rows
    again = rederive(tmp_path / "b")
    assert again.agrees, again.problems
    sustained = checks["capacity.sustained"]
    memory = checks["capacity.memory"]
    assert memory["status"] == "no_data"
    assert "saw no GPU where golive ran" in memory["summary"]
    fired = {r["rule"]: r["checks"] for r in verdict.data["rules_fired"]}
    assert fired["non-critical-unproven"] == ["capacity.memory"]
    if sustained["status"] == "pass":
        expected = Outcome.OBSERVE_WITH_LIMITS
    else:
        m = sustained["measurements"]
        assert sustained["status"] == "warn", sustained["summary"]
        assert m["latency_growth"] > m["max_latency_growth"], sustained["summary"]
        assert m["latency_growth_thirds"] > m["max_latency_growth"] * 2 / 3, sustained["summary"]
        assert verdict.data["limits"]["max_concurrency"] <= 2
        expected = Outcome.OBSERVE_WITH_LIMITS
    assert verdict.outcome is expected, [(c["id"], c["summary"]) for c in checks.values()]
    long_input = checks["capacity.long_input"]["measurements"]
    assert long_input["step_512"] == "accepted"
    assert long_input["step_4160"] == "rejected"  # above max_model_len: refused, not crashed
    assert long_input["recovered_after_rejections"] is True
    assert long_input["calibration"] == "measured with /tokenize"
    assert checks["capacity.concurrency"]["measurements"]["ceiling"] == 2
    assert checks["capacity.sustained"]["measurements"]["completed"] >= 1
    load = checks["capacity.model_load"]["measurements"]
    assert load["peak_load_rss_mib"] > 500
    with (tmp_path / "b/memory/capacity.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    phases = {r["phase"] for r in rows}
    assert {"long_input", "concurrency", "sustained"} <= phases
    assert all(float(r["host_rss_mib"]) > 500 for r in rows if r["host_rss_mib"])
    assert any(r.get("kv_cache_usage_perc") for r in rows)
    # every load window carries golive's own figures, and golive had headroom in each
    headroom = checks["golive.client_headroom"]
    assert headroom["status"] == "pass", headroom["summary"]
    watchdog = (tmp_path / "b/metrics/capacity-watchdog.jsonl").read_text().splitlines()
    windows = [json.loads(x) for x in watchdog]
    assert all(w["client"]["ticks"] > 0 and w["client"]["requests"] > 0 for w in windows)
    assert all(w["client"]["cpu_share"] is not None for w in windows)


async def test_slos_on_the_real_engine_give_a_goodput_ceiling(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """SLOs stated (ITL p95 within 5 s, at most 10% errors) on the real CPU vLLM: the short
    ramp step at 1 holds too few answers to bound a p95 (59 are needed) or to show none of
    them failing is under 10% (29 are), the 65 s sustained window at 2 holds enough with its
    ramp step (45 s held 56 answers on a slower 2-vCPU machine, 3 short of the 59), so the
    SLO ceiling is 2 and capacity.slo passes; every window's latency set is in
    metrics/latency.json and .csv, and golive decide, reading the records again, agrees."""
    out = tmp_path / "b"
    verdict = await _capacity(
        real_target,
        out,
        **{
            "capacity.concurrency": 2,
            "capacity.max_context": 512,
            "capacity.duration_s": 65,
            "slo.itl_p95_ms": 5000,
            "slo.error_rate": 0.1,
        },
    )
    slo = _checks(verdict)["capacity.slo"]
    assert slo["status"] == "pass", slo["summary"]
    m = slo["measurements"]
    assert m["slo_ceiling"] == 2
    assert m["c2_windows"] == "c2, sustained"
    assert m["c2_itl_p95_ms_state"] == "met"
    assert m["c2_error_rate_state"] == "met"
    assert m["c2_goodput_rps"] > 0
    assert m["c1_itl_p95_ms_state"] == "unproven"
    rows = json.loads((out / "metrics/latency.json").read_text())
    assert [r["label"] for r in rows if r["phase"] == "concurrency"][:2] == ["c1", "c2"]
    assert rows[-1]["phase"] == "sustained"
    assert rows[-1]["p99_itl_ms"] >= rows[-1]["median_itl_ms"] > 0
    assert (out / "metrics/latency.csv").read_text().count("\n") == len(rows) + 1
    assert json.loads((out / "metrics/slo.json").read_text())
    again = rederive(out)
    assert again.agrees, again.problems
    assert "capacity.slo" in again.rejudged_ids
    # the SLO judgement's own file deleted and the bundle resealed: decide holds the windows
    # to the config's SLOs from their records all the same (the file only says it ran)
    copy = tmp_path / "deleted"
    shutil.copytree(out, copy)
    (copy / "metrics/slo.json").unlink()
    Bundle(copy).seal()
    gone = rederive(copy)
    assert gone.agrees, gone.problems
    assert "capacity.slo" in gone.rejudged_ids


async def test_a_starved_client_is_not_judged_as_the_server(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """Busy threads in golive's own process take its CPU and its event loop: the windows they
    starved are golive's, not the engine's — golive.client_headroom fails, a ramp that had a
    starved step is no_data, and the verdict is hold, never a capacity limit."""
    stop = threading.Event()
    hogs = [threading.Thread(target=hold_the_gil, args=(stop,), daemon=True) for _ in range(4)]
    # each hog holds the interpreter 50 ms at a time (5 ms by default): the loop waits its
    # turn behind four of them whatever the engine's speed (with vLLM computing on both
    # cores, the engine's own slowdown raised the lag the windows allow past what 5 ms
    # turns gave: 259 ms of loop lag passed)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    for hog in hogs:
        hog.start()
    try:
        verdict = await _capacity(
            real_target,
            tmp_path / "b",
            # short windows: one starved window is the subject, and every window under
            # four hogs runs slow (this test took ~3 min of a CI run at 8 s steps, 30 s held)
            **{
                "capacity.concurrency": 2,
                "capacity.max_context": 256,
                "capacity.step_duration_s": 4,
                "capacity.duration_s": 10,
            },
        )
    finally:
        stop.set()
        for hog in hogs:
            hog.join()
        sys.setswitchinterval(switch)
    checks = _checks(verdict)
    headroom = checks["golive.client_headroom"]
    assert headroom["status"] == "fail", headroom["summary"]
    assert "limited by golive itself" in headroom["summary"]
    ramp = checks["capacity.concurrency"]
    windows = [json.loads(x) for x in (tmp_path / "b" / CAPACITY_WATCHDOG).read_text().splitlines()]
    starved = [w for w in windows if w["client_bottleneck"]]
    assert starved, windows
    # each window is judged by its own figures: on a busy 2-core box the hogs may starve
    # the calibration or sustained window and leave a ramp step its headroom (CI: only the
    # calibration window, in the concurrency phase, was starved, and the ramp was stable)
    if any(
        re.fullmatch(r"c\d+(r\d+)?", w["label"]) and w["phase"] == "concurrency" for w in starved
    ):
        assert ramp["status"] == "no_data", ramp["summary"]
        assert "the client, not the server, was the bottleneck" in ramp["summary"]
    assert verdict.outcome is Outcome.HOLD
    assert "max_concurrency" not in verdict.data["limits"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tight_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    """A server that runs one sequence at a time with a 512-token context."""
    paths = await ensure_target("qwen")
    target = await start_target(
        paths, ServeOptions(max_num_seqs=1, max_model_len=512), tmp_path_factory.mktemp("tight")
    )
    try:
        yield target
    finally:
        await stop_target(target)


async def test_golive_run_on_a_one_sequence_512_token_server(
    tight_target: RunningTarget, tmp_path: Path
) -> None:
    """The whole programme on --max-num-seqs 1 --max-model-len 512, asked for 1024-token
    inputs and concurrency 8 (one run: each is ~2 min on the 2-core target).

    Context: adjust configuration, with the largest accepted context as the limit. Steps are
    sized with the server's tokenizer and the top one keeps off the server's own edge (496 of
    512), so the limit is what the server serves; the step above max_model_len (576) is
    refused; production's stated 1,024 tokens are named as configuration (raise
    --max-model-len), not capacity. Concurrency: the queue grows from concurrency 2, so the
    measured ceiling is 1, traffic must be limited and the sustained window runs at 1. The
    other sections pass; the run's small Agent and smoke settings (one repeat, two cases, no
    classes) leave the programme incomplete, which holds it (issue 29 §2) beside the
    limits."""
    # The one-sequence server answers ~0.7 requests/s at concurrency 1: 30 s gave 19-21
    # completions (and once a +37% drift on them, no_data); 50 s gives 30 and more.
    code, verdict = await golive_run(
        tight_target, tmp_path / "b", "--duration", "50", "--max-context", "1024",
        "--concurrency", "8", "--required-context", "1024",
    )  # fmt: skip
    assert code == Outcome.HOLD.exit_code, verdict["rules_fired"]
    held = [r["rule"] for r in verdict["rules_fired"] if r["outcome"] == "hold"]
    assert held == ["programme-incomplete"], verdict["rules_fired"]
    # ... its 50 s sustained window (a programme decision needs 10 minutes), and the run's
    # 320-token cache proof, under the generic profile's 1,024-token prefix
    assert set(rules(verdict)["programme-incomplete"]) == {
        "smoke.coverage",
        "capacity.coverage",
        "agent.coverage",
        "cache.coverage",
    }
    checks = {c["id"]: c for c in verdict["checks"]}
    # the size the run asked for (--prefix-tokens 320), not the server's context, set it
    assert "caps it" not in checks["cache.coverage"]["summary"]
    assert "leave cache.prefix_tokens unset" in checks["cache.coverage"]["summary"]
    long_input = checks["capacity.long_input"]["measurements"]
    assert long_input["classification"] == "adjust-configuration"
    # production's 1,024 tokens are above the server's max_model_len: configuration, never
    # GPUs to buy (issue 28 §1)
    summary = checks["capacity.long_input"]["summary"]
    assert "production needs 1024 tokens" in summary, summary
    assert "raise --max-model-len" in summary, summary
    assert long_input["top_step"] == 496
    assert long_input["step_496"] == "accepted"
    assert 496 - 4 - 8 <= long_input["prompt_tokens_496"] <= 496 - 4  # sized by /tokenize
    assert long_input["step_576"] == "rejected"
    assert verdict["limits"]["max_context"] == 496
    ramp = checks["capacity.concurrency"]
    assert ramp["measurements"]["classification"] == "limit-traffic", ramp["summary"]
    # one sequence at a time: the queue grows from 2 — at 2 the wait can still stay inside the
    # queue limits on a slow run (CI once measured a ceiling of 2); never the tested 8
    ceiling = ramp["measurements"]["ceiling"]
    assert ceiling in (1, 2), ramp["summary"]
    assert "queue" in ramp["summary"]
    assert "capacity-limited" in rules(verdict)
    assert verdict["limits"]["max_concurrency"] == ceiling
    assert checks["capacity.sustained"]["measurements"]["concurrency"] == ceiling
    assert checks["cache.prefix_reuse"]["status"] == "pass"
    assert checks["agent.one_arg.required"]["status"] == "pass"


async def test_engine_killed_in_phase_3_is_a_recorded_termination(
    tight_target: RunningTarget, tmp_path: Path
) -> None:
    """SIGKILL the engine during concurrent traffic at concurrency 1: recorded with the memory
    curve before the death and the shapes of the requests in flight. No step was stable, so
    it is the lowest load failing (first-step-failure: hold), never expand-capacity; the
    phases after it never ran and say so (no_data, with no cause of their own). (Runs last:
    it kills the server.)"""
    out = tmp_path / "b"
    run = asyncio.create_task(
        _capacity(
            tight_target,
            out,
            **{
                "capacity.concurrency": 2,
                "capacity.max_context": 128,
                "capacity.step_duration_s": 40,
            },
        )
    )
    marker = out / "metrics/capacity-c1-before.prom"
    for _ in range(600):
        if marker.exists() or run.done():
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)
    engine = [pid for pid in process_tree(tight_target.pid) if pid != tight_target.pid]
    assert engine, "the engine processes were not found"
    for pid in engine:
        os.kill(pid, signal.SIGKILL)
    verdict = await asyncio.wait_for(run, 300)
    checks = _checks(verdict)
    assert verdict.outcome is Outcome.HOLD
    fired = rules(verdict.data)
    assert "capacity.concurrency" in fired["first-step-failure"]
    assert not {"capacity-exhausted", "capacity-unattributed"} & set(fired)
    ramp = checks["capacity.concurrency"]
    assert ramp["measurements"]["classification"] == "first-step-failure"
    assert "the engine terminated at concurrency 1" in ramp["summary"]
    sustained = checks["capacity.sustained"]
    assert sustained["status"] == "no_data"
    assert "not run" in sustained["summary"]
    assert "classification" not in sustained["measurements"]
    assert checks["golive.ledger"]["status"] == "pass"  # every request sent is recorded
    record = json.loads((out / "memory/termination.json").read_text())
    assert record["phase"] == "concurrency"
    assert record["concurrency"] == 1
    assert record["in_flight_requests"], "the request shapes in flight were not kept"
    assert record["in_flight_requests"][0]["prompt_chars"] > 0
    assert len(record["preceding_memory_curve"]) > 10
    assert record["context"]["max_model_len"] == 512
    assert record["topology"] == {"tp": 1, "pp": 1, "dp": 1, "ep": 1}
