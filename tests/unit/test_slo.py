"""SLOs and goodput (issue 31 §1-2): the standard latency set read from request records, each
SLO judged with 95% confidence either way, and the SLO ceiling with what it means for the
verdict (checks/capacity/latency_set.py, checks/capacity/slo.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_ramp, judge_sustained
from golive.checks.capacity.latency_files import latency_csv, latency_rows
from golive.checks.capacity.latency_set import answer_of, window_latency
from golive.checks.capacity.recorded import steps_differences
from golive.checks.capacity.rules import Action
from golive.checks.capacity.slo import SloStep, classify_slo, judge_slo, levels
from golive.checks.capacity.slo_objectives import (
    State,
    answers_needed,
    objectives,
    sustained_answers,
)
from golive.config import GoliveConfig
from golive.errors import RecordLineError
from golive.quantiles import lower_bound, quantile, rate_bounds
from golive.report.markdown import bundle_markdown
from golive.results import Classification
from golive.slo_config import SloConfig
from golive.verdict.document import VerdictDocument
from tests.helpers.record_lines import record_line

GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"


def _keys(
    label: str,
    ttft_ms: float,
    e2e_ms: float,
    tokens: int = 11,
    status: int = 200,
    lag_ms: float = 0.0,
) -> dict[str, Any]:
    """A saved record line's keys: first token and end since the send, `lag_ms` late on its
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


def _record(*args: Any, **kwargs: Any) -> RequestRecordLine:
    """The line of `_keys`, as a judge reads it from the bundle."""
    return record_line(**_keys(*args, **kwargs))


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


@pytest.mark.parametrize(
    ("answered", "failed", "state"),
    [
        (15, 5, State.MISSED),  # 5 of 20: at least 10% with 95% confidence, beyond 1%
        (19, 1, State.UNPROVEN),  # 1 of 20 could be 0.3% or 22%: neither shown
        (299, 0, State.MET),  # none of 299: at most 1.0% with 95% confidence
        (50, 0, State.UNPROVEN),  # none of 50 bounds the rate only to 5.8%
    ],
)
def test_the_error_rate_is_met_or_missed_only_with_95_percent_confidence(
    answered: int, failed: int, state: State
) -> None:
    """Failed requests against a 1% objective, with the rate's one-sided Clopper-Pearson
    bounds: a point estimate alone neither meets nor misses it."""
    window = _window("c1", _even(answered, 100, 200), status_500=failed)
    (found,) = objectives(window, SloConfig(error_rate=0.01))
    assert found.state is state, found.why


def test_the_rate_bounds_are_clopper_pearsons() -> None:
    """None of 5 bounds the rate at 1 - 0.05^(1/5) = 45%; 20 of 20 from below at 0.05^(1/20);
    1 of 20 from below at 1 - 0.95^(1/20)."""
    assert rate_bounds(0, 5)[0] == 0.0
    assert rate_bounds(0, 5)[1] == pytest.approx(1 - 0.05 ** (1 / 5), abs=1e-6)
    assert rate_bounds(20, 20)[0] == pytest.approx(0.05 ** (1 / 20), abs=1e-6)
    assert rate_bounds(1, 20)[0] == pytest.approx(1 - 0.95 ** (1 / 20), abs=1e-6)


def test_records_that_do_not_say_a_figure_leave_it_unproven() -> None:
    """A slow answer whose TTFT is missing or negative is not left out of the sample (that
    would make the rest look fast): the objective is not shown. One whose TTFT is not a number
    is no record: refused where it is read, never a figure."""
    fast = [_record("c1", 100, 400) for _ in range(80)]
    for broken in (None, -5.0):
        slow = _keys("c1", 3000, 3400)
        slow["timings_ms"]["first_token_from_intended"] = broken
        window = window_latency("c1", 1, [*fast, record_line(**slow)])
        (found,) = objectives(window, SloConfig(ttft_p95_ms=1000))
        assert found.state is State.UNPROVEN, (broken, found.why)
        assert "do not say their TTFT" in found.why
    for unread in ("fast", float("nan")):  # refused where the line is read, never a figure
        slow = _keys("c1", 3000, 3400)
        slow["timings_ms"]["first_token_from_intended"] = unread
        with pytest.raises(RecordLineError):
            record_line(**slow)
    no_usage = _keys("c1", 100, 400)
    del no_usage["response"]
    window = window_latency("c1", 1, [*fast, record_line(**no_usage)])
    (found,) = objectives(window, SloConfig(min_output_tokens_per_s_per_user=5))
    assert found.state is State.UNPROVEN


def test_a_chunk_stamp_repeated_adds_no_token_gap() -> None:
    """Eight copies of the first token's stamp are one read: no zero gaps dilute the ITL."""
    record = _keys("c1", ttft_ms=200, e2e_ms=1200, tokens=11)
    record["timings_ms"]["chunks"] = [195, *[200] * 8, *record["timings_ms"]["chunks"][2:]]
    assert min(answer_of(record_line(**record)).gaps_ms) == pytest.approx(100)


def test_token_gaps_count_as_many_samples_as_their_answers() -> None:
    """Ten answers of 11 tokens give 100 gaps, but their p95 is bounded as ten samples are:
    not shown, where 100 independent gaps would have shown it."""
    window = window_latency("c1", 1, [_record("c1", 100, 1100) for _ in range(10)])
    (found,) = objectives(window, SloConfig(itl_p95_ms=500))
    assert found.samples == 100
    assert found.state is State.UNPROVEN, found.why


UNPROVEN_BEYOND = "unproven, its p95 beyond the target"


def _step(level: int, state: Any, saturated: str | None = None, phase: str = "") -> SloStep:
    spread = {
        State.MET: (500, 900, 80),
        State.MISSED: (1100, 1500, 80),
        State.UNPROVEN: (500, 900, 10),
        UNPROVEN_BEYOND: (500, 1040, 10),
    }
    low, high, n = spread[state]
    label = f"c{level}"
    window = _window(label, _even(n, low, high))
    found = tuple(objectives(window, SLO))
    assert found[0].state is (State.UNPROVEN if state == UNPROVEN_BEYOND else state)
    return SloStep(level, window, found, saturated, phase or "concurrency")


SLO = SloConfig(e2e_p95_ms=1000)
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
        # too few answers at the lowest step, but within the target there, a higher one shown
        ([(1, UNPROVEN), (2, MET)], None, Action.STABLE, 2),
        # ... beyond the target there: nothing above it is read
        ([(1, UNPROVEN_BEYOND), (2, MET)], None, Action.NO_DATA, None),
        ([(1, MET), (2, UNPROVEN_BEYOND), (4, MET)], None, Action.LIMIT_TRAFFIC, 1),
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
    found = classify_slo(levels([_step(*s) for s in steps], SLO), required)
    assert (found.action, found.ceiling) == (action, ceiling), found.reason


@pytest.mark.parametrize(
    ("ramp", "sustained", "state"),
    [(UNPROVEN, MET, MET), (MET, MISSED, MISSED), (MISSED, MET, MISSED)],
)
def test_a_levels_windows_are_one_sample(ramp: State, sustained: State, state: State) -> None:
    """The long window at the ramp's level shows what a short step could not (10 answers
    within the target beside 80 shown within it); windows that disagree are judged together,
    not by whichever is luckier (80 answers over the target beside 80 within: half of them
    over, the p95 is missed)."""
    (level,) = levels([_step(4, ramp), _step(4, sustained, phase="sustained")], SLO)
    assert level.state is state, level.said()


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
    assert met.measurements["c4_min_output_tokens_per_s_per_user_samples"] == 16 + 1421
    assert met.measurements["c4_windows"] == "c4, sustained"
    missed = _judged(GOLDEN, SloConfig(e2e_p95_ms=1000))
    assert missed.classification is Classification.FIRST_STEP_FAILED
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


def _plain_records(root: Path, name: str) -> list[dict[str, Any]]:
    """A copy's record stream, decompressed to plain JSON lines (which golive reads first)."""
    rel = f"requests/{name}.jsonl"
    lines = BundleReader(root).jsonl(rel)
    (root / f"{rel}.zst").unlink()
    return lines


def _write(root: Path, name: str, lines: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (root / f"requests/{name}.jsonl").write_text(text)


@pytest.mark.tampers_bundle
def test_a_first_token_edited_against_its_own_send_is_caught(tmp_path: Path) -> None:
    """Sustained answers whose TTFT from the intended send was cut to 40% no longer agree
    with their TTFT from the send and its lag: the window is unreadable, the SLOs with it."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    lines = _plain_records(root, "capacity-sustained")
    for line in lines:
        timings = line["timings_ms"]
        if timings.get("first_token_from_intended"):
            timings["first_token_from_intended"] *= 0.4
    _write(root, "capacity-sustained", lines)
    found = _judged(root, SloConfig(ttft_p95_ms=1190))
    assert found.status.value == "no_data"
    assert "cannot be judged" in found.summary


@pytest.mark.tampers_bundle
def test_records_of_a_window_whose_row_was_deleted_are_caught(tmp_path: Path) -> None:
    """Records of a knee repeat (c4r1) beside no repeat row: its row was deleted with what it
    showed; the ramp, and the SLOs, are not judged from what is left."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    lines = _plain_records(root, "capacity-concurrency")
    repeat = [{**line, "label": "c4r1"} for line in lines if line["label"] == "c4"]
    _write(root, "capacity-concurrency", [*lines, *repeat])
    found = _judged(root, SloConfig(min_output_tokens_per_s_per_user=2))
    assert found.status.value == "no_data"
    ramp = judge_ramp(BundleReader(root), GoliveConfig().capacity)
    assert "c4r1 that no row states" in ramp.summary


def test_engine_figures_that_are_not_the_engines_give_no_saturation() -> None:
    """A ramp whose scrapes were another engine's (metrics frozen or elsewhere): its rows'
    saturation is not read, so no SLO miss is put on capacity from it."""
    config = GoliveConfig(slo=SloConfig(e2e_p95_ms=1000), capacity={"required_concurrency": 8})
    reader = BundleReader(GOLDEN)
    ramp = judge_ramp(reader, config.capacity)
    silent = dataclasses.replace(ramp, measurements={**ramp.measurements, "silent_windows": 1})
    found = judge_slo(reader, config, silent, judge_sustained(reader, config.capacity))
    assert found.status.value == "no_data"


@pytest.mark.tampers_bundle
def test_answers_longer_than_the_engine_generated_are_caught(tmp_path: Path) -> None:
    """Completion tokens multiplied tenfold in the sustained records (a faster decode speed on
    paper) exceed what the engine's generation-token counter grew by in that window."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    lines = _plain_records(root, "capacity-sustained")
    for line in lines:
        usage = (line.get("response") or {}).get("usage")
        if usage:
            usage["completion_tokens"] *= 10
    _write(root, "capacity-sustained", lines)
    sustained = judge_sustained(BundleReader(root), GoliveConfig().capacity)
    assert "generation-token counter grew by" in sustained.summary
    found = _judged(root, SloConfig(min_output_tokens_per_s_per_user=4))
    assert found.status.value == "no_data"


def test_reads_added_after_the_first_token_do_not_dilute_the_gaps() -> None:
    """An answer of 11 tokens with ten extra stamps 1 µs after its first token: more reads
    than its tokens can fill are not its own, so its ITL is not taken (the objective is not
    shown), never its real gaps dropped for the added zero ones."""
    record = _keys("c1", ttft_ms=200, e2e_ms=1200, tokens=11)
    chunks = record["timings_ms"]["chunks"]
    record["timings_ms"]["chunks"] = sorted([*chunks, *(200 + i / 1000 for i in range(1, 11))])
    answer = answer_of(record_line(**record))
    assert answer.gaps_ms == ()
    assert answer.lacks("itl")
    whole = answer_of(_record("c1", ttft_ms=200, e2e_ms=1200, tokens=11))
    assert not whole.lacks("itl")


def test_a_short_answer_in_one_read_has_no_gap_to_lack() -> None:
    """All of an answer's tokens in the read that brought its first (its end there too): no
    gap to time, and nothing missing; one whose end came a second later did lose its reads."""
    record = _keys("c1", ttft_ms=200, e2e_ms=201, tokens=3)
    record["timings_ms"]["chunks"] = [195, 200]
    assert not answer_of(record_line(**record)).lacks("itl")
    late = _keys("c1", ttft_ms=200, e2e_ms=1200, tokens=3)
    late["timings_ms"]["chunks"] = [195, 200]
    assert answer_of(record_line(**late)).lacks("itl")


def test_a_window_that_misses_alone_misses_its_level() -> None:
    """Five answers all over the target in a short ramp step beside 200 within it in the
    long window at that level: pooled, the p95 would be within; the step shows on its own
    that the level can miss, and it does."""
    short = _window("c4", _even(5, 1100, 1500))
    long = _window("c4", _even(200, 300, 600))
    steps = [
        SloStep(4, short, tuple(objectives(short, SLO)), None),
        SloStep(4, long, tuple(objectives(long, SLO)), None, "sustained"),
    ]
    (level,) = levels(steps, SLO)
    assert level.state is State.MISSED
    assert "c4 alone" in level.said()


def test_a_ramp_level_stated_twice_is_caught() -> None:
    """A second row of one ramp level would count its records twice in the SLO's sample."""
    row = {"concurrency": 2, "completed": 1, "errors": 0}
    records = [record_line(label="c2", http_status=200, failure=None, problems=[])]
    found = steps_differences([row, row], records, "steps")
    assert any("a second row of c2" in line for line in found)


@pytest.mark.parametrize(
    ("stated", "expected"),
    [
        ({}, 0),  # nothing stated: the drift's own 30 answers size the window
        ({"error_rate": 0.1}, 29),  # none of 29 failing bounds the rate under 10%
        ({"itl_p95_ms": 5000.0}, 59),  # a p95's distribution-free bound is the max of 59
        ({"min_output_tokens_per_s_per_user": 5.0}, 59),  # the speed's p5: the same
        ({"ttft_p95_ms": 800.0, "error_rate": 0.01}, 299),  # a 1% rate needs more
        ({"error_rate": 0.0}, 0),  # no count shows a rate of 0 met: it sizes nothing
    ],
)
def test_the_answers_a_level_needs_for_the_stated_slos(
    stated: dict[str, float], expected: int
) -> None:
    """The answers that let every stated objective be shown met where none fail: with that
    many the bound exists, with one fewer it does not (the judge's own bounds)."""
    slo = SloConfig(**stated)
    assert answers_needed(slo) == expected
    if "itl_p95_ms" in stated or "min_output_tokens_per_s_per_user" in stated:
        assert quantile([1.0] * expected, 95).upper is not None
        assert quantile([1.0] * (expected - 1), 95).upper is None
    rate = stated.get("error_rate")
    if rate and len(stated) == 1:
        assert rate_bounds(0, expected)[1] <= rate < rate_bounds(0, expected - 1)[1]


@pytest.mark.parametrize(
    ("stated", "ramp_answers", "minimum", "expected"),
    [
        ({}, 4, 1, 1),  # no SLO: the config's floor (the drift's 30 are sustained_length's)
        ({"itl_p95_ms": 5000.0}, 4, 1, 55),  # 59 pooled with the ramp step's 4
        ({"itl_p95_ms": 5000.0}, 70, 1, 1),  # the ramp step held them all already
        ({"error_rate": 0.1}, 4, 30, 30),  # the floor asks more than the SLO
    ],
)
def test_the_sustained_window_holds_what_the_slos_need_with_the_ramp_step(
    stated: dict[str, float], ramp_answers: int, minimum: int, expected: int
) -> None:
    """The sustained window is sized for the answers the SLOs still need after the ramp's
    step at that level (the two are judged pooled), never fewer than the config's floor:
    on a 2-core AMD box the SLO test's window held 42 of the 59 and no level was shown to
    meet the SLOs (issue 31 §1)."""
    assert sustained_answers(SloConfig(**stated), ramp_answers, minimum) == expected


def test_an_error_rate_too_small_to_show_sizes_a_window_without_a_crash() -> None:
    """An error rate so small that 1 - r rounds to 1 asks for more answers than any window
    holds (the window's 2x cap applies), never a division by zero after the whole ramp."""
    assert answers_needed(SloConfig(error_rate=1e-18)) > 10**15
