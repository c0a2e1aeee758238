"""`golive capacity` on the session's real vLLM: a healthy envelope with SLOs stated, and a
client starved by its own process (a server capped at one sequence and a short
max_model_len, and an engine killed in phase 3: test_tight_server.py)."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest
import pytest_asyncio

from golive.bundle.layout import CAPACITY_WATCHDOG
from golive.bundle.store import Bundle
from golive.orchestration.pipeline import Verdict
from golive.orchestration.rederive import rederive
from golive.results import Outcome
from golive.target.server import RunningTarget
from tests.helpers.gil import hold_the_gil
from tests.helpers.live_sections import capacity_checks, capacity_section

# The SLO test's run: the envelope test judges the same section (one run of ~90 s, not two)
ENVELOPE_SLOS = {
    "capacity.concurrency": 2,
    "capacity.max_context": 512,
    "capacity.duration_s": 65,
    "slo.itl_p95_ms": 5000,
    "slo.error_rate": 0.1,
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def envelope(
    real_target: RunningTarget, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Verdict, Path]:
    """The capacity section at concurrency 2 and a 512-token context, SLOs stated, on the
    session's server: the default envelope and the SLO test both judge it."""
    out = tmp_path_factory.mktemp("envelope") / "b"
    return await capacity_section(real_target, out, ENVELOPE_SLOS), out


async def test_default_envelope_is_stable(envelope: tuple[Verdict, Path]) -> None:
    """All four phases complete; the ramp is stable to 2; curves and long-input steps are
    saved. The sustained phase (65 s, the SLO test's, lengthened until it holds the 30
    answers a drift is judged on) runs on a shared 2-core box, where the engine's latency
    wanders by tens of percent (runs here measured -29 %, +24 %, +60 %): it must pass, or name
    a drift its own measurements show on both measures (fit and thirds), never a bare limit.
    A CPU box has no GPU to measure memory headroom on: capacity.memory is no_data saying so,
    so even a stable section is observe-with-limits (a named gap), never section-passed. The
    SLOs the run states are the SLO test's to judge: where they fell short, the outcome may
    only be worse for capacity.slo's own rule."""
    verdict, out = envelope
    checks = capacity_checks(verdict)
    slo_short = checks["capacity.slo"]["status"] != "pass"  # the SLO test fails on it
    # golive decide reads every window again from its records, scrapes and curve rows
    again = rederive(out)
    assert again.agrees, again.problems
    sustained = checks["capacity.sustained"]
    memory = checks["capacity.memory"]
    assert memory["status"] == "no_data"
    assert "saw no GPU where golive ran" in memory["summary"]
    fired = {r["rule"]: r["checks"] for r in verdict.data["rules_fired"]}
    assert fired["non-critical-unproven"] == ["capacity.memory"]  # capacity.slo is critical
    if slo_short:
        held = [r for r in verdict.data["rules_fired"] if r["outcome"] == "hold"]
        assert all(r["checks"] == ["capacity.slo"] for r in held), held
    if sustained["status"] == "pass":
        expected = Outcome.OBSERVE_WITH_LIMITS
    else:
        m = sustained["measurements"]
        assert sustained["status"] == "warn", sustained["summary"]
        assert m["latency_growth"] > m["max_latency_growth"], sustained["summary"]
        assert m["latency_growth_thirds"] > m["max_latency_growth"] * 2 / 3, sustained["summary"]
        assert verdict.data["limits"]["max_concurrency"] <= 2
        expected = Outcome.OBSERVE_WITH_LIMITS
    if checks["capacity.slo"]["status"] in ("fail", "no_data"):  # its own hold, said above
        expected = Outcome.HOLD
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
    with (out / "memory/capacity.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    phases = {r["phase"] for r in rows}
    assert {"long_input", "concurrency", "sustained"} <= phases
    assert all(float(r["host_rss_mib"]) > 500 for r in rows if r["host_rss_mib"])
    assert any(r.get("kv_cache_usage_perc") for r in rows)
    # every load window carries golive's own figures, and golive had headroom in each
    headroom = checks["golive.client_headroom"]
    assert headroom["status"] == "pass", headroom["summary"]
    watchdog = (out / "metrics/capacity-watchdog.jsonl").read_text().splitlines()
    windows = [json.loads(x) for x in watchdog]
    assert all(w["client"]["ticks"] > 0 and w["client"]["requests"] > 0 for w in windows)
    assert all(w["client"]["cpu_share"] is not None for w in windows)


async def test_slos_on_the_real_engine_give_a_goodput_ceiling(
    envelope: tuple[Verdict, Path], tmp_path: Path
) -> None:
    """SLOs stated (ITL p95 within 5 s, at most 10% errors) on the real CPU vLLM: the short
    ramp step at 1 holds too few answers to bound a p95 (59 are needed) or to show none of
    them failing is under 10% (29 are), the 65 s sustained window at 2 holds enough with its
    ramp step (45 s held 56 answers on a slower 2-vCPU machine, 3 short of the 59), so the
    SLO ceiling is 2 and capacity.slo passes; every window's latency set is in
    metrics/latency.json and .csv, and golive decide, reading the records again, agrees."""
    verdict, out = envelope
    slo = capacity_checks(verdict)["capacity.slo"]
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

    def release() -> None:
        stop.set()
        for hog in hogs:
            hog.join()
        sys.setswitchinterval(switch)

    sys.setswitchinterval(0.05)
    for hog in hogs:
        hog.start()
    try:
        verdict = await capacity_section(
            real_target,
            tmp_path / "b",
            # short windows: one starved window is the subject, and every window under
            # four hogs runs slow (this test took ~3 min of a CI run at 8 s steps, 30 s held)
            {
                "capacity.concurrency": 2,
                "capacity.max_context": 256,
                "capacity.step_duration_s": 4,
                "capacity.duration_s": 10,
            },
            # the hogs starve the load windows only: judging, sealing and the report after
            # them (every file write waiting its turn behind four hogs) took ~65 s of a run
            collected=release,
        )
    finally:
        release()
    checks = capacity_checks(verdict)
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
