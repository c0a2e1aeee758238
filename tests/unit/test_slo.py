"""SLOs and goodput (issue 31 §1-2): the standard latency set read from request records, each
SLO judged with 95% confidence either way, and the SLO ceiling with what it means for the
verdict (checks/capacity/latency_set.py, checks/capacity/slo.py)."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_ramp, judge_sustained
from golive.checks.capacity.latency_files import latency_csv, latency_rows
from golive.checks.capacity.latency_set import answer_of, window_latency
from golive.checks.capacity.rules import Action
from golive.checks.capacity.slo import SloStep, classify_slo, judge_slo
from golive.checks.capacity.slo_objectives import State, objectives
from golive.config import GoliveConfig
from golive.quantiles import lower_bound, quantile
from golive.report.markdown import bundle_markdown
from golive.slo_config import SloConfig
from golive.verdict.document import VerdictDocument

GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"


def _record(
    label: str,
    ttft_ms: float,
    e2e_ms: float,
    tokens: int = 11,
    status: int = 200,
    lag_ms: float = 0.0,
) -> dict[str, Any]:
    """A saved record line: first token and end since the send, `lag_ms` late on its
    schedule, one streamed chunk per token evenly spread after the first."""
    step = (e2e_ms - ttft_ms) / max(tokens - 1, 1)
    chunks = [ttft_ms - 5, *(ttft_ms + i * step for i in range(tokens)), e2e_ms + 0.1]
    return {
        "label": label,
        "started_at": 1000.0,
        "http_status": status,
        "failure": None if status < 400 else {"kind": "http_status", "message": "x"},
        "problems": [],
        "response": {"usage": {"prompt_tokens": 300, "completion_tokens": tokens}},
        "timings_ms": {
            "first_token": ttft_ms,
            "end": e2e_ms,
            "first_token_from_intended": ttft_ms + lag_ms,
            "end_from_intended": e2e_ms + lag_ms,
            "chunks": chunks,
        },
    }


def test_an_answer_is_timed_from_its_intended_send_and_its_tokens_from_the_first() -> None:
    """TTFT and end-to-end include the time a late client held the request; TPOT is the
    decode time over the tokens after the first; the role chunk before the first token and
    the usage chunk after the last are no inter-token gaps."""
    answer = answer_of(_record("c1", ttft_ms=200, e2e_ms=1200, tokens=11, lag_ms=50))
    assert answer.ttft_ms == 250
    assert answer.e2e_ms == pytest.approx(1250)
    assert answer.tpot_ms == pytest.approx(100)
    assert answer.tokens_per_s == pytest.approx(10)
    assert len(answer.gaps_ms) == 10
    assert all(g == pytest.approx(100) for g in answer.gaps_ms)


def test_goodput_counts_the_answers_meeting_every_objective() -> None:
    """Three of four answers meet TTFT and TPOT targets, one failed request counts as none."""
    records = [
        _record("c2", 100, 1100),
        _record("c2", 100, 1100),
        _record("c2", 900, 1900),  # late first token
        _record("c2", 100, 5100),  # slow decode: 500 ms a token
        _record("c2", 100, 1100, status=500),
    ]
    slo = SloConfig(ttft_p95_ms=500, itl_p95_ms=200)
    window = window_latency("c2", 2, records, slo)
    assert (window.requests, window.completed, window.goodput) == (5, 4, 2)
    row = window.to_json()
    assert row["failed"] == 1
    assert row["median_ttft_ms"] == pytest.approx(100)
    assert row["total_output_tokens"] == 44
    assert {"p90_e2el_ms", "p99_itl_ms", "p95_tpot_ms", "request_goodput"} <= set(row)


def test_the_lower_bound_of_a_percentile_is_what_the_data_shows_it_is_at_least() -> None:
    """Five samples bound a p95 from below by their 4th smallest (P(Bin(5, .95) >= 4) is
    .977); a median of 100 by the 42nd; no sample, no bound."""
    assert lower_bound([5.0, 1.0, 3.0, 4.0, 2.0], 95) == 4.0
    assert lower_bound([float(i) for i in range(1, 101)], 50) == 42.0
    assert lower_bound([], 95) is None


def _window(label: str, e2e_ms: list[float], status_500: int = 0) -> Any:
    records = [_record(label, min(100.0, e / 2), e) for e in e2e_ms]
    records += [_record(label, 100, 1000, status=500) for _ in range(status_500)]
    return window_latency(label, int(label[1:].split("r", maxsplit=1)[0]), records)


def _even(n: int, low: float, high: float) -> list[float]:
    return [low + (high - low) * i / max(n - 1, 1) for i in range(n)]


@pytest.mark.parametrize(
    ("values", "state"),
    [
        (_even(80, 500, 900), State.MET),  # 80 samples, all within 1000
        (_even(80, 1100, 1500), State.MISSED),  # 80 samples, all beyond
        (_even(10, 500, 900), State.UNPROVEN),  # within, but 10 cannot bound a p95 from above
        (_even(5, 1100, 1500), State.MISSED),  # 5 samples beyond it show it from below
        (_even(80, 500, 1040), State.UNPROVEN),  # its p95 straddles the target
    ],
)
def test_an_slo_is_met_or_missed_only_with_95_percent_confidence(
    values: list[float], state: State
) -> None:
    """A p95 target is met when the p95's upper bound is within it, missed when its lower
    bound is beyond it; otherwise the step is not shown either way."""
    window = _window("c1", values)
    (found,) = objectives(window, SloConfig(e2e_p95_ms=1000))
    assert found.state is state, found.why
    assert found.samples == len(values)


def test_the_error_rate_objective_counts_failed_requests() -> None:
    """One failed request in 20 is a 5% error rate: beyond a 1% objective."""
    window = _window("c1", _even(19, 100, 200), status_500=1)
    (found,) = objectives(window, SloConfig(error_rate=0.01))
    assert found.state is State.MISSED
    assert found.measured == pytest.approx(0.05)


def _step(level: int, state: State, saturated: str | None = None, phase: str = "") -> SloStep:
    spread = {State.MET: (500, 900, 80), State.MISSED: (1100, 1500, 80)}
    low, high, n = spread.get(state, (500, 900, 10))
    label = f"c{level}"
    window = _window(label, _even(n, low, high))
    found = tuple(objectives(window, SloConfig(e2e_p95_ms=1000)))
    assert found[0].state is state
    return SloStep(level, window, found, saturated, phase or "concurrency")


MET, MISSED, UNPROVEN = State.MET, State.MISSED, State.UNPROVEN
BUSY = "the engine ran at most 4 of 8 requests while 3.0 waited on average"


@pytest.mark.parametrize(
    ("steps", "required", "action", "ceiling"),
    [
        ([(1, MET), (2, MET), (4, MET)], None, Action.STABLE, 4),
        # a step that missed caps traffic at the last one that met, the higher ones unread
        ([(1, MET), (2, MET), (4, MISSED), (8, MET)], None, Action.LIMIT_TRAFFIC, 2),
        # production needs 4: the engine saturated where it missed, capacity to buy
        ([(1, MET), (2, MET), (4, MISSED, BUSY)], 4, Action.EXPAND_CAPACITY, 2),
        # ... without saturation it is not put on capacity
        ([(1, MET), (2, MET), (4, MISSED)], 4, Action.LIMIT_TRAFFIC, 2),
        # a need within the ceiling is met
        ([(1, MET), (2, MET), (4, MISSED, BUSY)], 2, Action.LIMIT_TRAFFIC, 2),
        # the lowest load missing it: no limit meets it
        ([(1, MISSED), (2, MISSED)], None, Action.FIRST_STEP_FAILED, None),
        # too few answers at the lowest step, a higher one shown: latency does not fall with load
        ([(1, UNPROVEN), (2, MET)], None, Action.STABLE, 2),
        ([(1, UNPROVEN), (2, UNPROVEN)], None, Action.NO_DATA, None),
        ([(1, UNPROVEN), (2, MISSED)], None, Action.NO_DATA, None),
        # shown at 1 only: a limit there, unless production needs no more
        ([(1, MET), (2, UNPROVEN)], None, Action.LIMIT_TRAFFIC, 1),
        ([(1, MET), (2, UNPROVEN)], 1, Action.STABLE, 1),
        ([], None, Action.NO_DATA, None),
    ],
)
def test_the_slo_ceiling_and_what_it_means(
    steps: list[tuple[Any, ...]], required: int | None, action: Action, ceiling: int | None
) -> None:
    """The checklist's actions from the SLO ceiling: a traffic limit, capacity to buy only
    with saturation where production's need is above it, hold where the lowest load misses
    it or nothing is shown."""
    found = classify_slo([_step(*s) for s in steps], required)
    assert (found.action, found.ceiling) == (action, ceiling), found.reason


@pytest.mark.parametrize(
    ("ramp", "sustained", "state"),
    [(UNPROVEN, MET, MET), (MET, MISSED, MISSED), (MISSED, MET, MISSED)],
)
def test_the_sustained_window_speaks_for_its_level_beside_the_ramp_step(
    ramp: State, sustained: State, state: State
) -> None:
    """The long window at the ramp's level shows what a short step could not; a miss in
    either window is a miss at that level."""
    steps = [_step(4, ramp), _step(4, sustained, phase="sustained")]
    found = classify_slo(steps, None)
    assert found.action is (Action.STABLE if state is MET else Action.FIRST_STEP_FAILED)


def _judged(root: Path, slo: SloConfig) -> Any:
    config = GoliveConfig(slo=slo)
    reader = BundleReader(root)
    ramp, sustained = judge_ramp(reader, config.capacity), judge_sustained(reader, config.capacity)
    return judge_slo(reader, config, ramp, sustained)


def test_the_demo_bundle_held_to_slos_from_its_records() -> None:
    """The recorded CPU demo (ramp 1, 2, 4; 1,421 answers sustained at 4): a decode-speed floor
    of 2 tokens/s is shown up to 4 by the sustained window; 1 s end-to-end is missed at
    concurrency 1, whose 5 answers took over 2 s — hold, not a limit."""
    met = _judged(GOLDEN, SloConfig(min_output_tokens_per_s_per_user=2))
    assert met.status.value == "pass"
    assert met.measurements["slo_ceiling"] == 4
    assert met.measurements["sustained_min_output_tokens_per_s_per_user_samples"] == 1421
    missed = _judged(GOLDEN, SloConfig(e2e_p95_ms=1000))
    assert missed.measurements["classification"] == "first-step-failure"
    assert "concurrency 1 misses the SLO" in missed.summary


@pytest.mark.tampers_bundle
def test_a_ramp_row_its_records_contradict_is_not_held_to_the_slos(tmp_path: Path) -> None:
    """An edited step row makes the ramp's summary unreadable, and the SLOs with it."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    steps = root / "metrics" / "capacity-steps.jsonl"
    steps.write_text(steps.read_text().replace('"completed": 5', '"completed": 50', 1))
    found = _judged(root, SloConfig(min_output_tokens_per_s_per_user=2))
    assert found.status.value == "no_data"
    assert "cannot be judged" in found.summary


def test_the_latency_files_hold_every_window_of_the_demo() -> None:
    """metrics/latency.json's rows: the ramp's three steps and the sustained window, each
    with the standard set; the CSV has a header and one line each."""
    rows = latency_rows(BundleReader(GOLDEN), SloConfig())
    assert [(r["phase"], r["label"]) for r in rows] == [
        ("concurrency", "c1"),
        ("concurrency", "c2"),
        ("concurrency", "c4"),
        ("sustained", "c4"),
    ]
    assert rows[-1]["completed"] == 1421
    assert rows[-1]["request_goodput"] is None
    assert rows[-1]["p99_ttft_ms"] >= rows[-1]["p90_ttft_ms"] >= rows[-1]["median_ttft_ms"]
    text = latency_csv(rows)
    assert text.count("\n") == 5
    assert text.startswith("phase,label,concurrency,")


def test_the_bounds_agree_with_a_simulation() -> None:
    """Over 2,000 simulated windows of 60 exponential latencies, the p95's upper bound lies
    below the true p95 in at most 5% of them, and the lower bound above it in at most 5%."""
    rng = random.Random(7)
    true_p95 = -1000 * math.log(0.05)
    over = under = 0
    for _ in range(2000):
        values = [rng.expovariate(1 / 1000) for _ in range(60)]
        upper = quantile(values, 95).upper
        lower = lower_bound(values, 95)
        over += upper is not None and upper < true_p95
        under += lower is not None and lower > true_p95
    assert over / 2000 <= 0.06
    assert under / 2000 <= 0.06


def test_the_report_states_the_ceilings_beside_the_workload_and_every_window() -> None:
    """report.md of the recorded demo: the ramp's ceiling with the workload's token shape and
    turns beside it, and one row per load window with its TTFT/ITL/TPOT/e2e percentiles."""
    text = bundle_markdown(GOLDEN, VerdictDocument.read(GOLDEN))
    section = text.split("## Latency, throughput and goodput", 1)[1].split("\n## ", 1)[0]
    assert "throughput ceiling (the ramp's): **concurrency 4**" in section
    assert "input tokens p50 / p90 / p99" in section
    assert "user turn(s) a conversation" in section
    assert "| sustained | c4 | 1421 / 1421 |" in section
    assert section.count("| concurrency | c") == 3
