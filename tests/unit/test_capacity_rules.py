"""Capacity classifiers: stability per step, the ramp ceiling, long input, latency trends."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

from golive.checks.capacity.context_rules import LongOutcome, LongStep, classify_long_input
from golive.checks.capacity.phases import sustained_length
from golive.checks.capacity.rules import (
    Action,
    StabilityPolicy,
    classify_concurrency,
    saturated,
)
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.window_sizing import request_cap, window_coverage
from golive.checks.capacity.windows import (
    classify_sustained,
    thirds_growth,
    trend,
)
from golive.results import CheckClass, CheckResult, Outcome, Status
from golive.verdict.decide import decide, limits
from golive.verdict.recorded import typed_measurements

POLICY = StabilityPolicy()


def _step(
    c: int, queue: float = 0.01, errors: int = 0, died: bool = False, e2e: float = 4.0
) -> StepStats:
    return StepStats(
        c,
        completed=10,
        errors=errors,
        wall_s=20.0,
        e2e_p50_s=e2e,
        e2e_p95_s=e2e * 1.2,
        ttft_p95_s=1.0,
        queue_mean_s=queue,
        max_waiting=c - 1,
        max_running=1,
        preemptions=0,
        engine_died=died,
    )


@pytest.mark.parametrize(
    ("steps", "action", "ceiling"),
    [
        ([_step(1), _step(2), _step(4)], Action.STABLE, 4),
        # --max-num-seqs 1: from concurrency 2 on, requests wait as long as they run.
        ([_step(1), _step(2, queue=3.9, e2e=8.0)], Action.LIMIT_TRAFFIC, 1),
        ([_step(1), _step(2), _step(4, errors=3)], Action.LIMIT_TRAFFIC, 2),
        # no step stable: the lowest load failed, a defect to fix, never a capacity ceiling
        ([_step(1, queue=5.0, e2e=6.0)], Action.FIRST_STEP_FAILED, None),
        ([_step(1, errors=3), _step(2)], Action.FIRST_STEP_FAILED, None),
        # ... but a step golive's own window ended before anything came back measured nothing
        ([dataclasses.replace(_step(1, errors=2), completed=0, cancelled=2)], Action.NO_DATA, None),
        # HTTP 5xx at the lowest load is the server's word even where golive ran short of CPU
        (
            [dataclasses.replace(_step(1, errors=9), server_errors=9, coverage="client-bound")],
            Action.FIRST_STEP_FAILED,
            None,
        ),
        # Measured on --max-num-seqs 1: c=2 bought no throughput, latency doubled.
        (
            [_step(1, e2e=3.15), StepStats(2, 4, 0, 14.4, 6.98, 7.6, 6.0, 1.18, 1, 1, 0)],
            Action.LIMIT_TRAFFIC,
            1,
        ),
        # death after a stable step: the envelope is that step (observe-with-limits there)
        ([_step(1), _step(2, died=True)], Action.LIMIT_TRAFFIC, 1),
        ([_step(1, died=True)], Action.FIRST_STEP_FAILED, None),
        # nothing ran: no measurement, never a capacity verdict
        ([], Action.NO_DATA, None),
        # a server without vLLM gauges (a non-vLLM /metrics): stability was not measured
        (
            [dataclasses.replace(_step(1), max_running=None, max_waiting=None, queue_mean_s=None)],
            Action.NO_DATA,
            None,
        ),
        # HTTP 4xx is the server's configuration, never exhausted capacity
        (
            [_step(1), dataclasses.replace(_step(2, errors=4), refused=4, refused_detail="x")],
            Action.SERVER_REFUSED,
            None,
        ),
        # preemptions mean the KV cache ran out at that step
        ([_step(1), dataclasses.replace(_step(2), preemptions=3)], Action.LIMIT_TRAFFIC, 1),
    ],
)
def test_concurrency_ramp(steps: list[StepStats], action: Action, ceiling: int | None) -> None:
    """The ramp's steps give the checklist's action (stable, limit traffic, expand capacity) and the
    ceiling the measurements support."""
    result = classify_concurrency(steps, POLICY)
    assert result.action is action
    assert result.ceiling == ceiling


_QUEUED = dataclasses.replace(_step(4, queue=3.0, e2e=8.0), mean_waiting=2.0, max_running=2)
_FAILING = _step(4, errors=3)  # 5xx at 4, the engine's queue empty and nothing preempted


@pytest.mark.parametrize(
    ("top", "need", "action"),
    [
        (_QUEUED, None, Action.LIMIT_TRAFFIC),  # no need stated: a ceiling to observe
        (_QUEUED, 2, Action.LIMIT_TRAFFIC),  # the need fits under the ceiling
        (_QUEUED, 8, Action.EXPAND_CAPACITY),  # saturated below what production needs
        (_FAILING, 8, Action.LIMIT_TRAFFIC),  # failures, but no saturation: not capacity
    ],
)
def test_expand_capacity_needs_saturation_and_a_need_above_the_ceiling(
    top: StepStats, need: int | None, action: Action
) -> None:
    """ "Expand capacity: OOM or queue collapse continues after reasonable context and
    concurrency controls": only where the engine's own gauges show it saturated above a
    stable step, and production's stated need is above that ceiling."""
    policy = StabilityPolicy(required_concurrency=need)
    result = classify_concurrency([_step(1), _step(2), top], policy)
    assert result.action is action
    assert result.ceiling == 2
    if need == 8 and action is Action.LIMIT_TRAFFIC:
        assert "the engine showed no saturation" in result.reason


def test_a_need_above_the_tested_ramp_is_held_to_what_was_tested() -> None:
    """Every step stable up to the ramp's top (8) while production needs 64: the tested
    envelope is 8, a named limit, never a go-live with no limit."""
    steps = [_step(1), _step(2), _step(4), _step(8)]
    result = classify_concurrency(steps, StabilityPolicy(required_concurrency=64))
    assert result.action is Action.LIMIT_TRAFFIC
    assert result.ceiling == 8
    assert "--concurrency 64" in result.reason
    assert classify_concurrency(steps, StabilityPolicy(required_concurrency=8)).action is (
        Action.STABLE
    )


def test_waiting_beside_a_full_batch_is_not_saturation() -> None:
    """One HTTP 500 in 1,000 sustained requests at 8 with 0.6 waiting on average while the
    engine ran all 8: no sign the engine ran out of room, so never expand-capacity."""
    flat = trend([(float(t), 2.0) for t in range(20)])
    result = classify_sustained(
        flat, [1.0], 1, 1000, False, 8, mean_waiting=0.6, max_running=8, required_concurrency=8
    )
    assert result.action is Action.LIMIT_TRAFFIC
    queued = classify_sustained(
        flat, [1.0], 1, 1000, False, 8, mean_waiting=0.6, max_running=5, required_concurrency=8
    )
    assert queued.action is Action.EXPAND_CAPACITY
    assert "ran at most 5 of 8 requests while 0.6 waited" in queued.reason


def test_golive_ending_requests_at_the_lowest_load_is_not_a_failure() -> None:
    """At concurrency 1 the sustained window's only errors were requests golive ended when
    the window ran out: nothing failed, nothing is measured (no_data), never a defect."""
    flat = trend([(float(t), 2.0) for t in range(20)])
    result = classify_sustained(flat, [1.0], 2, 20, False, 1, cancelled=2)
    assert result.action is Action.NO_DATA
    assert "nothing failed" in result.reason


def test_the_context_envelope_stops_below_the_smallest_input_that_broke() -> None:
    """512 served, 1024 failed, 2048 served, 4096 killed the engine: the envelope is 512."""
    steps = [
        LongStep(512, LongOutcome.ACCEPTED),
        LongStep(1024, LongOutcome.FAILED, "HTTP 500"),
        LongStep(2048, LongOutcome.ACCEPTED),
        LongStep(4096, LongOutcome.DIED, "connection refused"),
    ]
    result = classify_long_input(steps, 4096, 8192)
    assert result.action is Action.ADJUST_CONFIGURATION
    assert result.max_context == 512
    assert "a 1024-token input failed" in result.reason


def test_sustained_failures_are_capacity_only_with_saturation_and_need() -> None:
    """A death under sustained load at 4 with the KV cache exhausted (preemptions) and 8
    needed is expand-capacity; the same death with no stated need is a limit at 2, and at
    concurrency 1 it is the lowest load failing: a defect."""
    flat = trend([(float(t), 2.0) for t in range(20)])
    died = functools.partial(classify_sustained, flat, [1.0], 0, 40, True, preemptions=5)
    assert died(4, required_concurrency=8).action is Action.EXPAND_CAPACITY
    limited = died(4)
    assert limited.action is Action.LIMIT_TRAFFIC
    assert limited.ceiling == 2
    assert died(1, required_concurrency=8).action is Action.FIRST_STEP_FAILED


def test_a_sustained_retry_storm_is_a_limit_never_capacity() -> None:
    """A retry storm in the sustained window at 12 is a limit at 6, with or without a stated
    need and whatever the engine's queue showed (8 running, 4 waiting): the client saw load
    shed in front of the engine (429/503), and from the retries alone a rate limit cannot be
    told from exhausted capacity ("Refusals and rate limits are configuration findings",
    issue 28 §1) — GPUs are never asked for on it."""
    flat = trend([(float(t), 2.0) for t in range(40)])
    storm = functools.partial(
        classify_sustained,
        flat,
        [1.0],
        0,
        40,
        False,
        12,
        retries=(40, 0.05),
        mean_waiting=4,
        max_running=8,
    )
    limited = storm()
    assert limited.action is Action.LIMIT_TRAFFIC
    assert limited.ceiling == 6
    assert "retry storm under sustained load at concurrency 12" in limited.reason
    assert storm(required_concurrency=12).action is Action.LIMIT_TRAFFIC


def test_the_sustained_window_names_refusals_as_the_ramp_does() -> None:
    """HTTP 429 in the sustained window is named a rate limit, any other 4xx a request the
    server is not configured for, in the ramp's words (one wording for both windows)."""
    flat = trend([(float(t), 2.0) for t in range(40)])
    for detail, said in (
        ("HTTP 429: Too Many Requests", "rate-limited 5/40 request(s) with HTTP 429"),
        ("HTTP 400: tools not enabled", "refused 5/40 request(s) with HTTP 4xx"),
    ):
        result = classify_sustained(flat, [1.0], 5, 40, False, 8, refused=5, refused_detail=detail)
        assert result.action is Action.SERVER_REFUSED
        assert result.reason.startswith(f"under sustained load, the server {said}")
        assert "at concurrency 8" in result.reason


def test_small_queue_times_are_noise() -> None:
    """Half a second of queueing is tolerated even when requests are short."""
    result = classify_concurrency([_step(1), _step(2, queue=0.4, e2e=0.5)], POLICY)
    assert result.action is Action.STABLE


@pytest.mark.parametrize(
    ("steps", "action", "largest"),
    [
        (
            [
                LongStep(256, LongOutcome.ACCEPTED),
                LongStep(512, LongOutcome.ACCEPTED),
                LongStep(576, LongOutcome.REJECTED),
            ],
            Action.STABLE,
            512,
        ),
        # above max_model_len and served: the reported limit is not the real one
        (
            [LongStep(512, LongOutcome.ACCEPTED), LongStep(576, LongOutcome.ACCEPTED, "", 571)],
            Action.INCONSISTENT,
            576,
        ),
        # ... but not when the server counted fewer tokens than golive estimated
        (
            [LongStep(512, LongOutcome.ACCEPTED), LongStep(576, LongOutcome.ACCEPTED, "", 498)],
            Action.STABLE,
            576,
        ),
        (
            [LongStep(128, LongOutcome.ACCEPTED), LongStep(256, LongOutcome.REFUSED, "HTTP 422")],
            Action.SERVER_REFUSED,
            128,
        ),
        # max_model_len 512 below the intended 1024: rejections inside the envelope.
        (
            [
                LongStep(128, LongOutcome.ACCEPTED),
                LongStep(256, LongOutcome.ACCEPTED),
                LongStep(512, LongOutcome.REJECTED),
                LongStep(1024, LongOutcome.REJECTED),
            ],
            Action.ADJUST_CONFIGURATION,
            256,
        ),
        (
            [
                LongStep(128, LongOutcome.ACCEPTED),
                LongStep(512, LongOutcome.DIED, "connection refused"),
            ],
            Action.ADJUST_CONFIGURATION,  # the context served is the envelope
            128,
        ),
        (
            [LongStep(128, LongOutcome.ACCEPTED), LongStep(512, LongOutcome.FAILED, "HTTP 500")],
            Action.ADJUST_CONFIGURATION,
            128,
        ),
        # the smallest input failed: a defect, nothing was served to limit to
        ([LongStep(128, LongOutcome.FAILED, "HTTP 500")], Action.FIRST_STEP_FAILED, None),
        ([LongStep(128, LongOutcome.DIED, "connection refused")], Action.FIRST_STEP_FAILED, None),
    ],
)
def test_long_input(steps: list[LongStep], action: Action, largest: int | None) -> None:
    """The long-input ladder gives the largest context served and whether the configuration or the
    traffic must change."""
    result = classify_long_input(
        steps,
        max_context=1024 if action is Action.ADJUST_CONFIGURATION and len(steps) > 2 else 512,
        max_model_len=512,
    )
    assert result.action is action
    assert result.max_context == largest


def test_no_long_input_step_is_no_data() -> None:
    """A ladder with no step measured is no_data, never a pass."""
    assert classify_long_input([], 1024, 512).action is Action.NO_DATA


@pytest.mark.parametrize(
    ("total", "errors", "refused", "preemptions", "action"),
    [
        (2, 0, 0, 0, Action.NO_DATA),  # two completions cannot show a trend
        (0, 0, 0, None, Action.NO_DATA),  # nothing came back
        (40, 3, 3, 0, Action.SERVER_REFUSED),  # 4xx: configuration, not capacity
        (40, 3, 0, 0, Action.LIMIT_TRAFFIC),  # 5xx/transport failures: no saturation shown
        (40, 0, 0, 5, Action.LIMIT_TRAFFIC),  # preemptions: the KV cache runs out
        (40, 0, 0, 0, Action.STABLE),
    ],
)
def test_sustained_judges_only_what_it_measured(
    total: int, errors: int, refused: int, preemptions: float | None, action: Action
) -> None:
    """The sustained phase is judged on errors, refusals and preemptions it measured; what it did
    not measure is not a pass."""
    flat = trend([(float(t), 2.0 + (0.01 if t % 2 else -0.01)) for t in range(20)])
    result = classify_sustained(
        flat, [1.0, 1.0], errors, total, False, 4, refused=refused, preemptions=preemptions
    )
    assert result.action is action


@pytest.mark.parametrize(
    ("completed", "action"),
    [(12, Action.NO_DATA), (29, Action.NO_DATA), (30, Action.LIMIT_TRAFFIC)],
)
def test_a_drift_over_few_completions_sets_no_limit(completed: int, action: Action) -> None:
    """A 10 s CPU window of ~12 completions measured drifts from -29% to +75% between runs of
    one load: a drift sets a limit only over at least ten completions a third; below that it
    says what it saw and asks for a longer run."""
    rising = [(float(t), 1.0 + 0.05 * t + (0.02 if t % 2 else -0.02)) for t in range(completed)]
    result = classify_sustained(
        trend(rising), [1.0, 1.0], 0, completed, False, 4, thirds=thirds_growth(rising)
    )
    assert result.action is action
    if action is Action.NO_DATA:
        assert f"only {completed} requests completed: too few" in result.reason
        assert "--duration" in result.reason


def test_trend_finds_a_rising_line_and_its_interval() -> None:
    """The latency trend finds a rising slope with a confidence interval above zero, and a noisy
    flat line straddling zero."""
    points = [(float(t), 1.0 + 0.05 * t + (0.01 if t % 2 else -0.01)) for t in range(60)]
    fitted = trend(points)
    assert fitted is not None
    assert fitted.slope == pytest.approx(0.05, abs=0.002)
    assert fitted.low > 0
    assert fitted.relative_growth == pytest.approx(0.05 * 59 / 1.0, rel=0.05)
    flat = trend([(float(t), 2.0 + (0.3 if t % 3 == 0 else -0.1)) for t in range(60)])
    assert flat is not None
    assert flat.low < 0 < flat.high
    assert trend([(0.0, 1.0), (1.0, 2.0)]) is None


@pytest.mark.parametrize(
    ("slope", "errors", "died", "action"),
    [
        (0.0, 0, False, Action.STABLE),
        (0.05, 0, False, Action.LIMIT_TRAFFIC),
        (0.0, 2, False, Action.LIMIT_TRAFFIC),  # no need stated: a limit to observe
        (0.0, 0, True, Action.LIMIT_TRAFFIC),
    ],
)
def test_sustained(slope: float, errors: int, died: bool, action: Action) -> None:
    """Latency drift, errors and an engine death under sustained load map to the checklist's
    actions; a drift halves the concurrency."""
    fitted = trend([(float(t), 1.0 + slope * t + (0.02 if t % 2 else -0.02)) for t in range(40)])
    result = classify_sustained(fitted, [1.0, 1.0, 1.05, 0.98], errors, 40, died, concurrency=8)
    assert result.action is action
    if action is Action.LIMIT_TRAFFIC:
        assert result.ceiling == 4
        if slope:
            assert "while throughput stayed flat" in result.reason
        else:
            assert "concurrency 8 did not hold for the sustained window" in result.reason


def _cap(cid: str, classification: str, **m: int) -> CheckResult:
    """A capacity check as verdict.json records it, read back as `golive decide` reads it."""
    status = Status.FAIL if classification == "expand-capacity" else Status.WARN
    typed = typed_measurements({"classification": classification, **m})
    return CheckResult(
        cid,
        CheckClass.CAPACITY,
        True,
        status,
        cid,
        typed.measurements,
        classification=typed.classification,
        limits=typed.limits,
    )


def test_decision_maps_the_three_actions_and_collects_limits() -> None:
    """The three capacity actions map to observe-with-limits with limits, and to expand-capacity
    when the chain is proven."""
    chain = [
        CheckResult("environment.vllm_version", CheckClass.ENVIRONMENT, True, Status.PASS, "v"),
        CheckResult("startup.log", CheckClass.STARTUP, True, Status.PASS, "log"),
    ]
    limited = [
        _cap("capacity.concurrency", "limit-traffic", limit_max_concurrency=1, ceiling=1),
        _cap("capacity.long_input", "adjust-configuration", limit_max_context=256),
    ]
    decision = decide(limited, ("capacity",))
    assert decision.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert limits(limited).to_json() == {"max_concurrency": 1, "max_context": 256}
    exhausted = decide(
        [*chain, *limited, _cap("capacity.sustained", "expand-capacity")], ("env", "capacity")
    )
    assert exhausted.outcome is Outcome.EXPAND_CAPACITY
    assert [r.rule for r in exhausted.rules_fired] == [
        "capacity-exhausted",
        "capacity-limited",
        "section-only",
    ]


def test_a_held_back_queue_is_a_ceiling() -> None:
    """The engine runs fewer requests than offered and the rest wait: the queue grows."""
    held = StepStats(
        2,
        4,
        0,
        14.0,
        6.2,
        6.4,
        5.4,
        0.9,
        max_waiting=1,
        max_running=1,
        preemptions=0,
        mean_waiting=0.9,
    )
    result = classify_concurrency([_step(1), held], POLICY)
    assert result.action is Action.LIMIT_TRAFFIC
    assert result.ceiling == 1
    assert "ran at most 1 of 2" in result.reason
    busy = StepStats(
        2,
        8,
        0,
        14.0,
        4.0,
        4.2,
        1.0,
        0.0,
        max_waiting=1,
        max_running=2,
        preemptions=0,
        mean_waiting=0.1,
    )
    assert classify_concurrency([_step(1), busy], POLICY).action is Action.STABLE


@pytest.mark.parametrize(
    ("duration", "wall", "stopped_by", "peak", "concurrency", "covered"),
    [
        (20.0, 20.4, "duration", 4, 4, True),
        # vLLM 0.24 on two H200s: the sustained cap (64 x 60 = 3,840) was reached after ~25 s
        # of 60 (window_rps 153, 155.5, 75.5, 0, 0, 0) and the rest of the phase sent nothing.
        (60.0, 25.1, "request_cap", 64, 64, False),
        (20.0, 19.0, "request_cap", 8, 8, True),  # the cap met the end of the window
        (20.0, 20.0, "duration", 12, 64, False),  # the client never held the concurrency
        (20.0, 20.0, "duration", 1, 1, True),
    ],
)
def test_a_window_must_carry_the_load_it_was_asked_to(
    duration: float, wall: float, stopped_by: str, peak: int, concurrency: int, covered: bool
) -> None:
    """A window cut short in time or concurrency is not judged as if it carried its load."""
    reason = window_coverage(duration, wall, stopped_by, 3840, peak, concurrency)
    assert (reason is None) is covered


def test_an_uncovered_window_is_no_data_never_a_limit() -> None:
    """The H200 sustained window judged as 'latency rose 23%', limit-traffic at 32: the
    data never supported that envelope. Not covered: no_data, not judged."""
    rising = trend([(float(t), 0.2 + 0.0035 * t) for t in range(25)])
    reason = window_coverage(60.0, 25.1, "request_cap", 3840, 64, 64)
    result = classify_sustained(
        rising, [153, 155.5, 75.5, 0, 0, 0], 0, 3840, False, 64, coverage=reason
    )
    assert result.action is Action.NO_DATA
    assert "3840" in result.reason
    cut = dataclasses.replace(_step(2), coverage="at most 1 of 2 requests were in flight")
    assert classify_concurrency([_step(1), cut], POLICY).action is Action.NO_DATA


def test_request_caps_follow_the_measured_rate() -> None:
    """150 requests/s measured at concurrency 1 on the GPU: a 60 s window at 64 may send
    150 x 64 x 60 x 3; on the CPU (0.4/s) the same window is capped at a few hundred."""
    assert request_cap(150.0, 64, 60.0, 3.0) == 1_728_064
    assert request_cap(0.4, 4, 15.0, 3.0) == 76


def test_a_step_between_the_last_accepted_and_the_first_refused() -> None:
    """The limit is not a coarse ladder rung: 6,144 accepted and 8,192 refused inside an
    8,192 envelope asks one more step at 7,168."""
    from golive.checks.capacity.long_ladder import between

    steps = [
        LongStep(4096, LongOutcome.ACCEPTED),
        LongStep(6144, LongOutcome.ACCEPTED),
        LongStep(8192, LongOutcome.REJECTED),
        LongStep(8256, LongOutcome.REJECTED),
    ]
    assert between(steps, 8192) == 7168
    assert between(steps[:2], 8192) is None  # nothing refused inside the envelope
    assert between([*steps[:2], LongStep(6200, LongOutcome.REJECTED)], 8192) is None


def test_the_top_step_stays_off_the_servers_edge() -> None:
    """H200, max_model_len 8192 and an intended 8192: the top step is 8111, not a request
    that sits exactly on the limit (refused there) and made a false 7,168-token envelope."""
    from golive.checks.capacity.context_rules import top_step

    assert top_step(8192, 8192) == 8111
    assert top_step(4096, 8192) == 4096  # well inside the limit: as intended
    assert top_step(16384, 8192) == 8111  # above the server: the refusal at 8256 says so
    assert top_step(512, 512) == 496
    assert top_step(8192, None) == 8192


def test_a_significant_drift_must_also_be_large() -> None:
    """4,000 completions over 60 s with latency creeping 3%: the interval excludes zero, the
    size does not matter: stable. 30% by the fit and by the thirds: a limit."""
    from golive.checks.capacity.windows import thirds_growth

    creep = [
        (t * 0.015, 0.2 * (1 + 0.03 * t / 4000) + (0.001 if t % 2 else -0.001)) for t in range(4000)
    ]
    fitted = trend(creep)
    assert fitted is not None
    assert fitted.low > 0  # significant
    small = classify_sustained(fitted, [66.0] * 6, 0, 4000, False, 16, thirds=thirds_growth(creep))
    assert small.action is Action.STABLE
    assert "limit 20%" in small.reason
    rise = [(t * 0.015, 0.2 * (1 + 0.3 * t / 4000)) for t in range(4000)]
    big = classify_sustained(
        trend(rise), [66.0] * 6, 0, 4000, False, 16, thirds=thirds_growth(rise)
    )
    assert big.action is Action.LIMIT_TRAFFIC
    assert "last third's median" in big.reason
    # a steep fit driven by a short tail, while the typical request did not slow: stable
    tail = [(float(t), 1.0) for t in range(90)] + [(90.0 + t, 4.0) for t in range(10)]
    assert thirds_growth(tail) == 0.0
    short = classify_sustained(trend(tail), [1.0] * 6, 0, 100, False, 4, thirds=0.0)
    assert short.action is Action.STABLE


def _captured_steps(folder: str) -> list[StepStats]:
    path = Path(__file__).parents[1] / "data" / folder / "capacity-steps.jsonl"
    return [StepStats.from_json(json.loads(x)) for x in path.read_text().splitlines() if x]


def test_requests_queueing_outside_the_engine_name_the_api_server() -> None:
    """vLLM 0.24 on one H200 (random-weight Qwen shape): golive held 16 in flight, the engine's
    running + waiting averaged 6.8, and by Little's law the time each request spent outside the
    engine grew from 25 ms at concurrency 1 to 104 ms: the requests queued in the API server.
    The finding names it, its figures and its remedy; a fixed overhead that does not grow is no
    finding, however small the engine's share."""
    from golive.checks.capacity.api_server import api_server_bound, api_server_finding

    steps = _captured_steps("vllm-gpu-0.24-h200x1-tier")
    finding = api_server_finding(steps) or ""
    assert finding.startswith("API server bound: at concurrency 16 ")
    assert "from 25 ms at concurrency 1 to 104 ms" in finding
    assert "--api-server-count" in finding
    base, c16 = steps[0], next(s for s in steps if s.concurrency == 16)
    # the same engine share with a flat time outside the engine: a fixed cost, not a queue
    flat = dataclasses.replace(c16, completed=round(c16.completed * 4.1))
    assert api_server_bound(flat, base) is None
    assert api_server_bound(dataclasses.replace(c16, engine_held=12.0), base) is None
    assert api_server_bound(dataclasses.replace(c16, engine_held=None), base) is None
    # 32 gave 1.16x the requests for 1.7x the latency: one window a side, inside counting
    # noise at 95%, so the ramp sets no knee on it (it limited at 16 under the one-standard-
    # error rule); the API server finding stands on its own figures
    knee = classify_concurrency(steps, POLICY)
    assert (knee.action, knee.ceiling) == (Action.STABLE, 32), knee.reason


def _calibrated_steps() -> dict[int, StepStats]:
    """The ramp of the calibrated H200 run (vLLM 0.24, TP=2), as golive saved it."""
    path = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x2-calibrated/capacity-steps.jsonl"
    fields = {f.name for f in dataclasses.fields(StepStats)}
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {
        r["concurrency"]: StepStats(**{k: v for k, v in r.items() if k in fields}) for r in rows
    }


def test_a_gain_within_counting_noise_of_the_threshold_is_not_a_knee() -> None:
    """On the H200 the ramp's 16 → 32 step gained 1.198x throughput over 1,505 and 1,816
    requests while the engine's queue stayed empty: golive called it a knee at 1.2 and limited
    traffic to 16, which the data does not support (a later run was stable to 32)."""
    steps = _calibrated_steps()
    assert saturated(steps[16], steps[32], POLICY) is None
    result = classify_concurrency(list(steps.values()), POLICY)
    assert result.action is Action.STABLE, result.reason
    assert result.ceiling == 32


def test_a_clear_knee_names_where_the_time_went() -> None:
    """A throughput knee on the calibrated H200 steps names its gain with its error and where the
    extra time went."""
    steps = _calibrated_steps()
    flat = dataclasses.replace(
        steps[32], completed=1540, e2e_p50_s=(steps[16].e2e_p50_s or 0.0) * 2
    )
    reason = saturated(steps[16], flat, POLICY)
    assert reason is not None
    assert "1.02x (±0.07, 1505 and 1540 requests)" in reason
    assert "the engine's waiting queue stayed empty" in reason
    queued = dataclasses.replace(flat, max_waiting=12.0, queue_mean_s=0.21)
    assert "queue in the engine (queue 0.21 s on average, up to 12 waiting)" in str(
        saturated(steps[16], queued, POLICY)
    )


def test_refusals_are_judged_before_coverage() -> None:
    """HTTP 429 above two requests in flight cut the sustained window short: the finding is
    the rate limit, quoting the server, not "the engine is faster than the cap allowed"."""
    flat = trend([(float(t), 2.0) for t in range(20)])
    result = classify_sustained(
        flat,
        [1.0],
        8,
        40,
        False,
        4,
        refused=8,
        refused_detail="HTTP 429: rate limit exceeded",
        coverage="the request cap (40) was reached after 3.0 s of 30 s",
    )
    assert result.action is Action.SERVER_REFUSED
    assert "HTTP 429: rate limit exceeded" in result.reason


@pytest.mark.parametrize(
    ("configured", "measured", "expected"),
    [
        (25.0, None, 25.0),  # no ramp rate at that level: as configured
        (25.0, 10.0, 25.0),  # a fast engine: 30 answers come well within the window
        (25.0, 1.0, 37.5),  # one answer a second: 37.5 answers need 37.5 s
        (25.0, 0.47, 50.0),  # the demo's CPU engine at 4 would need 80 s: held to 2x
        (25.0, 0.1, 50.0),  # never more than twice the configured window
    ],
)
def test_the_sustained_window_is_long_enough_to_judge_a_drift(
    configured: float, measured: float | None, expected: float
) -> None:
    """`capacity.duration_s` is lengthened to what the ramp's measured rate needs for the
    30 answers a drift is judged on (+25%), at most 2x: a 25 s window that held 15 answers
    made the demo's verdict hold (too few to tell a drift from noise)."""
    assert sustained_length(configured, measured) == expected


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (1, 82.6),  # no more than the drift asks: its 30 answers at 0.454/s, +25%
        (29, 82.6),  # an error rate of 10%: fewer than the drift's 30
        (40, 110.1),  # a p95 bound's 59, 19 of them answered in the ramp's step
        (55, 130.0),  # 55 more on the slowest 2-core engine measured: held to 2x
    ],
)
def test_the_sustained_window_is_long_enough_for_the_stated_slos(
    answers: int, expected: float
) -> None:
    """Where the SLOs need more answers than a drift does (59 for a p95 bound, less what the
    ramp's step at that level answered), the window is lengthened to them, at most 2x: on a
    2-core AMD box the SLO test's 65 s window at concurrency 2 (0.454 answers/s) held 42 of
    the 59 and no level was shown to meet the SLOs."""
    assert sustained_length(65.0, 0.454, answers) == expected


@pytest.mark.parametrize(
    ("preemptions", "required", "expected", "ceiling"),
    [
        (None, None, Action.CONTINUES, None),  # no saturation: the failure continues, hold
        (None, 8, Action.CONTINUES, None),  # a need stated, still no saturation
        (5.0, None, Action.LIMIT_TRAFFIC, 2),  # saturated: load; a lower limit
        (5.0, 6, Action.EXPAND_CAPACITY, 2),  # saturated and needed above it: capacity
    ],
    ids=["unsaturated", "unsaturated-need", "saturated", "saturated-need"],
)
def test_a_failure_at_the_last_stable_step_after_a_restart(
    preemptions: float | None, required: int | None, expected: Action, ceiling: int | None
) -> None:
    """Sustained at the ramp's last stable step (4) after the engine died above it and was
    restarted, 5 of 60 requests fail: with the engine saturated it is load (a limit at half,
    or capacity with a need above it); without, the failure continues under the limit the
    death set and no lower limit is known to hold (failure-continues)."""
    flat = trend([(float(t), 2.0) for t in range(60)])
    result = classify_sustained(
        flat,
        [1.0],
        5,
        60,
        False,
        4,
        preemptions=preemptions,
        required_concurrency=required,
        after_restart=True,
    )
    assert result.action is expected, result.reason
    assert result.ceiling == ceiling
    if expected is Action.CONTINUES:
        assert "no saturation evidence" in result.reason


def test_the_ramp_blames_capacity_only_on_the_engines_own_evidence() -> None:
    """Issue 28 §1 on the ramp, production needing 8 above a ceiling of 2: a death whose
    failure says the memory ran out is expand-capacity although the gauges were not read; a
    step failed only by the client retrying shed load is a limit, whatever the engine's queue
    showed; a window of HTTP 429 answers is named as a rate limit, never "not configured"."""
    need = StabilityPolicy(required_concurrency=8)
    oom = dataclasses.replace(
        _step(4, died=True),
        max_waiting=None,
        max_running=None,
        mean_waiting=None,
        failure_detail="first: server-error HTTP 500: 'CUDA out of memory. Tried to allocate'",
    )
    died = classify_concurrency([_step(1), _step(2), oom], need)
    assert died.action is Action.EXPAND_CAPACITY, died.reason
    assert "ran out of memory" in died.reason
    killed = dataclasses.replace(oom, failure_detail="first: death: the engine was OOM killed")
    assert classify_concurrency([_step(1), _step(2), killed], need).action is (
        Action.EXPAND_CAPACITY
    )  # the long-input ladder's words for it too: one pattern for both
    zoom = dataclasses.replace(oom, failure_detail="first: server-error HTTP 500: 'ZOOM'")
    assert classify_concurrency([_step(1), _step(2), zoom], need).action is Action.LIMIT_TRAFFIC
    silent = dataclasses.replace(oom, failure_detail="first: transport: connection reset")
    assert classify_concurrency([_step(1), _step(2), silent], need).action is (Action.LIMIT_TRAFFIC)
    storm = dataclasses.replace(_step(4), retries=9, mean_waiting=2.0, max_running=3)
    shed = classify_concurrency([_step(1), _step(2), storm], need)
    assert shed.action is Action.LIMIT_TRAFFIC, shed.reason
    assert "retry storm" in shed.reason
    limited = dataclasses.replace(
        _step(4, errors=3), refused=3, refused_detail="HTTP 429: Too Many Requests"
    )
    rate = classify_concurrency([_step(1), _step(2), limited], need)
    assert rate.action is Action.SERVER_REFUSED
    assert "rate-limited 3 request(s) with HTTP 429" in rate.reason
    assert "not configured for" not in rate.reason
