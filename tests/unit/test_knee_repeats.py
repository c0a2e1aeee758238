"""A throughput knee is a limit only when it reproduces (issue 28 §3): a candidate knee is
measured again (the two steps around it, alternating order) and set only when the 95%
interval of the gain, the server's run-to-run spread included, lies below the policy's gain.

Evidence: three ramps of one vLLM 0.24 server on two H200s (TP=2), where single windows put
the knee at 16 in one run and nowhere in the others; and a scripted server with a known knee
and a known window-to-window spread.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from itertools import permutations
from pathlib import Path

import pytest

from golive.checks.capacity.knee import knee, ratio
from golive.checks.capacity.rules import (
    Action,
    StabilityPolicy,
    classify_concurrency,
    ramp_next,
)
from golive.checks.capacity.step_stats import StepStats

DATA = Path(__file__).parents[1] / "data"
POLICY = StabilityPolicy()
H200_RUNS = (
    "vllm-gpu-0.24-h200x2-calibrated",
    "vllm-gpu-0.24-h200x2-calibrated/capacity-top-step",
    "vllm-gpu-0.24-h200x2-tier",
)


def _ramp(name: str) -> dict[int, StepStats]:
    rows = [
        json.loads(line) for line in (DATA / name / "capacity-steps.jsonl").read_text().splitlines()
    ]
    return {r["concurrency"]: StepStats.from_json(r) for r in rows}


def _window(level: int, rps: float, p50: float, wall: float = 20.0, **kw: object) -> StepStats:
    completed = max(1, round(rps * wall))
    base: dict[str, object] = {
        "concurrency": level,
        "completed": completed,
        "errors": 0,
        "wall_s": wall,
        "e2e_p50_s": p50,
        "e2e_p95_s": p50 * 1.2,
        "ttft_p95_s": p50 / 4,
        "queue_mean_s": 0.01,
        "max_waiting": 0.0,
        "max_running": float(level),
        "preemptions": 0.0,
    }
    return StepStats(**{**base, **kw})  # type: ignore[arg-type]


def test_single_h200_windows_agree_once_counting_noise_is_taken_at_95_percent() -> None:
    """The premise, from the captures: judged one window a side within one standard error of
    counting noise (the rule until 2026-12-04), the tier run limited at 16 and the other two
    runs of the same server did not. With the single windows' 95% interval the three agree
    (32); where windows are large enough, the repeats below are the rule."""
    ceilings = {
        name: classify_concurrency(list(_ramp(name).values()), POLICY).ceiling for name in H200_RUNS
    }
    assert ceilings == dict.fromkeys(H200_RUNS, 32)
    tier = _ramp(H200_RUNS[2])
    gain = ratio([tier[16].throughput_rps], [tier[32].throughput_rps],
                 1 / tier[16].completed + 1 / tier[32].completed)  # fmt: skip
    assert gain is not None
    assert gain.value < 1.2 <= gain.high  # short of 1.2x, but not by more than the noise


@pytest.mark.parametrize(
    "order", list(permutations(H200_RUNS)), ids=lambda o: "-".join(n[-4:] for n in o)
)
def test_the_h200_ramps_agree_once_the_candidate_is_repeated(order: tuple[str, str, str]) -> None:
    """Whichever run is the ramp and which two are its repeats at 16 and 32, the answer is the
    same: the gain's interval, with the runs' spread in it, does not exclude "no knee", so no
    limit is set and the summary says the candidate did not reproduce."""
    first, *others = (_ramp(name) for name in order)
    repeats = {level: [run[level] for run in others] for level in (16, 32)}
    result = classify_concurrency(list(first.values()), POLICY, repeats)
    assert result.action is Action.STABLE, result.reason
    assert result.ceiling == 32
    if order[0].endswith("tier"):  # the run whose single windows said knee
        assert "no significant knee from concurrency 16 to 32" in result.reason
        assert "95% interval" in result.reason


def test_a_knee_that_reproduces_is_set_with_its_interval() -> None:
    """Flat throughput (±3%) and doubled latency over three windows a side: a knee at 8."""
    lower = [_window(8, rps, 0.16) for rps in (50.0, 51.5, 49.0)]
    upper = [_window(16, rps, 0.33) for rps in (50.5, 49.5, 51.0)]
    reason = knee(lower, upper, POLICY)
    assert reason is not None
    assert "over 3 and 3 windows, the server's run-to-run spread included" in reason
    steps = [
        _window(1, 8.0, 0.12),
        _window(2, 15.0, 0.13),
        _window(4, 28.0, 0.14),
        lower[0],
        upper[0],
    ]
    result = classify_concurrency(steps, POLICY, {8: lower[1:], 16: upper[1:]})
    assert result.action is Action.LIMIT_TRAFFIC
    assert result.ceiling == 8


def test_a_repeat_that_fails_makes_its_level_unstable() -> None:
    """A repeat window at 16 with failed requests: 16 is not stable, whatever the first
    window said; the reason names the repeat."""
    steps = [_window(8, 50.0, 0.16), _window(16, 60.0, 0.33)]
    broken = _window(16, 40.0, 0.4, errors=5)
    result = classify_concurrency(steps, POLICY, {16: [broken]})
    assert result.ceiling == 8
    assert "(knee repeat 1)" in result.reason


def test_the_ramp_repeats_a_candidate_once_then_decides() -> None:
    """The ramp's next move: a candidate knee is repeated once (not with knee_repeats 1, not twice); a clear gain goes on; a failing step stops without repeats."""
    lower, upper = _window(8, 50.0, 0.16), _window(16, 52.0, 0.33)
    assert ramp_next([lower], upper, POLICY, {}, 3) == "repeat"
    assert ramp_next([lower], upper, POLICY, {}, 1) == "stop"  # the single-window rule
    assert ramp_next([lower], upper, POLICY, {16: [upper]}, 3) == "stop"  # repeated already
    assert ramp_next([lower], _window(16, 95.0, 0.17), POLICY, {}, 3) == "continue"
    unstable = _window(16, 52.0, 0.33, errors=3)
    assert ramp_next([lower], unstable, POLICY, {}, 3) == "stop"  # not a knee: a failure


def test_one_window_a_side_keeps_the_counting_noise_rule() -> None:
    """A gain of 1.198 on 1,505 and 1,816 requests: within one standard error of 1.2."""
    gain = ratio([75.0], [89.87], 1 / 1505 + 1 / 1816)
    assert gain is not None
    assert gain.high >= 1.2 > gain.value


# --- a scripted server with a known knee and a known window-to-window spread --------------

Server = Callable[[int, random.Random], StepStats]


def _server(knee_at: int | None, spread: float, per_slot: float = 6.0) -> Server:
    """Throughput grows with concurrency up to `knee_at` and is flat past it; with no knee
    (None) it doubles up to 8 and gains 1.25x per doubling past it (latency then grows 1.6x, so
    only the gain tells the two apart). Each window is off by a normal factor of sd `spread`;
    median latency by Little's law."""

    def window(level: int, rng: random.Random) -> StepStats:
        if knee_at is None:
            true = per_slot * min(level, 8) * (max(level, 8) / 8) ** 0.322
        else:
            true = per_slot * min(level, knee_at)
        rps = true * max(0.2, rng.gauss(1.0, spread))
        return _window(level, rps, level / rps)

    return window


def _ramp_on(server: Server, seed: int, repeats: int) -> int | None:
    """golive's ramp (1..32) on the scripted server, repeating a candidate knee as
    `phases.concurrency_ramp` does: the ceiling it sets."""
    rng = random.Random(seed)
    stable: list[StepStats] = []
    again: dict[int, list[StepStats]] = {}
    step = None
    for level in (1, 2, 4, 8, 16, 32):
        step = server(level, rng)
        then = ramp_next(stable, step, POLICY, again, repeats)
        if then == "repeat":
            lower = stable[-1].concurrency
            for number in range(1, repeats):
                for c in (level, lower) if number % 2 else (lower, level):
                    again.setdefault(c, []).append(server(c, rng))
            then = ramp_next(stable, step, POLICY, again, 1)
        if then != "continue":
            break
        stable.append(step)
    assert step is not None
    return classify_concurrency([*stable, step], POLICY, again).ceiling


def test_a_known_knee_is_found_in_nine_of_ten_runs() -> None:
    """Knee at 8, windows off by 5% (sd): the limit is 8 in at least 9 of 10 runs."""
    server = _server(8, 0.05)
    ceilings = [_ramp_on(server, seed, 3) for seed in range(10)]
    assert ceilings.count(8) >= 9, ceilings


def test_no_knee_is_set_on_a_server_without_one() -> None:
    """A server gaining 1.25x per doubling past 8, windows off by 8%: single windows set a
    knee in some runs; with repeats no limit is set in at least 9 of 10."""
    server = _server(None, 0.08)
    repeated = [_ramp_on(server, seed, 3) for seed in range(10)]
    single = [_ramp_on(server, seed, 1) for seed in range(10)]
    assert repeated.count(32) >= 9, repeated
    assert single.count(32) < 10, single  # the premise: one window a side is not enough


H200_KNEE = DATA / "vllm-gpu-0.24-h200x1-knee"


def _rows(name: str) -> list[StepStats]:
    return [
        StepStats.from_json(json.loads(line))
        for line in (H200_KNEE / name).read_text().splitlines()
    ]


def test_a_knee_repeated_on_the_h200_and_the_run_after_it() -> None:
    """Two `golive capacity` runs on one H200 (vLLM 0.24, TP=1), two minutes apart. The first,
    right after startup, repeated its candidate knee at 32 -> 64 and confirmed it: 1.12x over
    3 and 3 windows, interval 1.09-1.15x (its three c64 windows 98-101 rps). The second saw
    no candidate: c64 at 119 rps, c32 the same 88-89 rps in both. Within a run the repeats
    agree; between runs the server moved: judged on all five c64 windows and four c32 ones,
    the knee is no longer significant. (What the in-run interval cannot see is recorded in
    the issue; the verdicts' limits were 32 in both runs, the second from its sustained
    window.)"""
    first, repeats, second = (
        _rows("run1-capacity-steps.jsonl"),
        _rows("run1-capacity-knee-repeats.jsonl"),
        _rows("run2-capacity-steps.jsonl"),
    )
    again: dict[int, list[StepStats]] = {}
    for row in repeats:
        again.setdefault(row.concurrency, []).append(row)
    run1 = classify_concurrency(first, POLICY, again)
    assert (run1.action, run1.ceiling) == (Action.LIMIT_TRAFFIC, 32), run1.reason
    assert "95% interval 1.09-1.15x over 3 and 3 windows" in run1.reason
    run2 = classify_concurrency(second, POLICY)
    assert (run2.action, run2.ceiling) == (Action.STABLE, 64), run2.reason
    by_level = {s.concurrency: s for s in second}
    pooled = {level: [*again[level], by_level[level]] for level in (32, 64)}
    both = classify_concurrency(first, POLICY, pooled)
    assert both.ceiling == 64, both.reason
    verdicts = json.loads((H200_KNEE / "verdicts.json").read_text())
    assert verdicts["run1"]["limits"] == verdicts["run2"]["limits"] == {"max_concurrency": 32}


def test_repeats_are_run_only_where_they_could_confirm_a_knee() -> None:
    """A 2-core CPU engine answers 3-5 requests a window: even a perfectly flat gain could
    never be shown below 1.2x by three windows a side, so no repeats are spent there (the
    demo's ramp took a minute more for nothing); a GPU window of ~900 answers can."""
    cpu_lower, cpu_upper = _window(2, 0.45, 3.8, wall=10.0), _window(4, 0.47, 8.4, wall=10.0)
    assert cpu_upper.completed <= 5
    assert ramp_next([cpu_lower], cpu_upper, POLICY, {}, 3) == "continue"  # not a knee either
    gpu_lower, gpu_upper = _window(32, 88.0, 0.36, wall=10.0), _window(64, 98.0, 0.64, wall=10.0)
    assert ramp_next([gpu_lower], gpu_upper, POLICY, {}, 3) == "repeat"
