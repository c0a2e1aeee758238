"""Guardrails from an accepted bundle (the demo's, captured from the real CPU vLLM): the rules
use the metric names the engine exposed and pass `promtool check rules`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from golive.errors import ConfigError
from golive.operate.guardrail_files import write_guardrails
from golive.orchestration.rederive import require_rederived
from tests.helpers.guardrail_inputs import ACCEPTED, generate, synthetic_bundle
from tests.helpers.promtool import alerts_fire, rendered_annotations

DATA = ACCEPTED
GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"
# the bundles made here hold the accepted verdict and the scrapes the rules read, sealed (the
# alerts name the manifest's digest) without the rest of the evidence: they re-derive to hold
pytestmark = pytest.mark.synthetic_checks
_bundle = synthetic_bundle


def _rules(path: Path) -> dict[str, str]:
    data = yaml.safe_load(path.read_text())
    return {r["alert"]: r["expr"] for r in data["groups"][0]["rules"]}


def test_rules_for_the_accepted_envelope_pass_promtool(tmp_path: Path) -> None:
    """An accepted bundle gives every alerting rule, with the accepted ceiling, and promtool accepts
    the file."""
    out = tmp_path / "rules.yml"
    assert generate(_bundle(tmp_path), out, ttft_slo_s=10.0, cache_floor=0.3) == []
    rules = _rules(out)
    assert set(rules) >= {
        "GoliveQueueBeyondEnvelope",
        "GoliveConcurrencyAboveAcceptedCap",
        "GoliveKvCacheNearlyFull",
        "GoliveErrorRate",
        "GoliveHttp5xxRate",
        "GoliveToolCallParseFailures",
        "GolivePrefixCacheRegression",
        "GoliveTtftBurnRate1h",
        "GoliveTtftBurnRate6h",
    }
    assert rules["GoliveConcurrencyAboveAcceptedCap"].endswith("> 4")  # the demo's ceiling
    assert "[1h]" in rules["GoliveTtftBurnRate1h"]
    # the generic HTTP series counted only where the same target is a vLLM engine
    assert "and on(instance, job) vllm:num_requests_running{" in rules["GoliveHttp5xxRate"]
    assert "[5m]" in rules["GoliveTtftBurnRate1h"]
    text = out.read_text()
    assert "tool_choice=auto" in text  # the observe-with-limits feature, stated for the gateway
    check = subprocess.run(
        ["promtool", "check", "rules", str(out)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 9 rules found" in check.stdout


def test_renamed_and_missing_metrics(tmp_path: Path) -> None:
    """Alerts follow the names the engine exposed; a rule whose metric is absent is left out."""
    prom = (
        "\n".join(
            line.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
            for line in (DATA / "after-agent.prom").read_text().splitlines()
            if "tool_call_parser" not in line and "http_requests" not in line
        )
        + "\n"
    )
    out = tmp_path / "rules.yml"
    left_out = generate(_bundle(tmp_path, prom), out, ttft_slo_s=10.0, cache_floor=0.3)
    rules = _rules(out)
    assert "vllm:gpu_cache_usage_perc" in rules["GoliveKvCacheNearlyFull"]
    assert "GoliveToolCallParseFailures" not in rules
    assert left_out == [
        "GoliveHttp5xxRate (needs http_requests_total, vllm:num_requests_running)",
        "GoliveToolCallParseFailures (needs vllm:tool_call_parser_invocations_total)",
    ]
    assert "left out" in out.read_text()


def test_caps_of_observe_with_limits(tmp_path: Path) -> None:
    """An observe-with-limits bundle's caps become the rules' thresholds, the context cap on the
    first bucket above it."""
    limits = {"max_concurrency": 1, "max_context": 300, "disable_features": []}
    out = tmp_path / "rules.yml"
    generate(_bundle(tmp_path, limits=limits), out)
    rules = _rules(out)
    assert rules["GoliveConcurrencyAboveAcceptedCap"].endswith("> 1")
    # the first bucket >= 300, its bound as the engine exposes it (Prometheus matches the text)
    assert 'le="500.0"' in rules["GoliveContextAboveAcceptedCap"]
    check = subprocess.run(["promtool", "check", "rules", str(out)], check=False)
    assert check.returncode == 0


def test_only_accepted_bundles(tmp_path: Path) -> None:
    """A bundle that was not accepted defines no envelope: refused."""
    with pytest.raises(ConfigError, match="was not accepted"):
        write_guardrails(
            _bundle(tmp_path, outcome="hold"), tmp_path / "rules.yml", vouch=require_rederived
        )


def test_a_p95_of_four_requests_sets_no_ttft_slo(tmp_path: Path) -> None:
    """The demo's ramp steps served 2-4 requests each: their p95 TTFT is nearly a maximum and
    bounds nothing, so no burn-rate rule is derived from it; the rules file says why."""
    out = tmp_path / "rules.yml"
    left_out = generate(_bundle(tmp_path), out, cache_floor=0.3)
    why = (
        "the p95 TTFT inside the envelope came from at most 4 requests per step; a p95 needs "
        "59 to be bounded at 95% confidence: give --ttft-slo"
    )
    assert left_out == [f"GoliveTtftBurnRate1h ({why})", f"GoliveTtftBurnRate6h ({why})"]
    assert "GoliveTtftBurnRate1h" not in _rules(out)
    assert "needs 59 to be bounded" in out.read_text()


def test_the_h200_ramp_bounds_its_ttft_slo(tmp_path: Path) -> None:
    """vLLM 0.24 on two H200s: 313 to 2,000+ requests per ramp step, every p95 bounded; the
    SLO is 1.5x the largest p95 TTFT inside the accepted ceiling."""
    tier = DATA.parent / "vllm-gpu-0.24-h200x2-tier"
    root = _bundle(tmp_path)
    verdict = json.loads((tier / "verdict.json").read_text())
    (root / "verdict.json").write_text(json.dumps({**verdict, "outcome": "go-live"}))
    shutil.copy(tier / "capacity-steps.jsonl", root / "metrics/capacity-steps.jsonl")
    steps = [json.loads(x) for x in (tier / "capacity-steps.jsonl").read_text().splitlines()]
    ceiling = next(c for c in verdict["checks"] if c["id"] == "capacity.concurrency")
    inside = [s for s in steps if s["concurrency"] <= ceiling["measurements"]["ceiling"]]
    assert min(s["completed"] for s in inside) >= 59
    out = tmp_path / "rules.yml"
    assert generate(root, out, cache_floor=0.3) == []
    slo = round(1.5 * max(s["ttft_p95_s"] for s in inside), 3)
    assert f"TTFT SLO ({slo:.2f} s" in out.read_text()


def test_whole_number_bounds_match_the_series_the_engine_exposes(tmp_path: Path) -> None:
    """vLLM exposes `le="1.0"` and `le="1000.0"`: with every first token slower than a 0.9 s
    SLO and every prompt over a 1,000-token cap for hours, Prometheus fires the TTFT burn-rate
    and the context-cap alerts (written `le="1"`, they never fired)."""
    limits = {"max_concurrency": 4, "max_context": 1000, "disable_features": []}
    out = tmp_path / "rules.yml"
    generate(_bundle(tmp_path, limits=limits), out, ttft_slo_s=0.9)
    engine = 'model_name="qwen2.5-coder-0.5b",job="vllm",namespace="llm",pod="p0",instance="i0"'
    series = [
        # 60 requests a minute, every first token in the 2.5 s bucket, none under 1 s
        (f'vllm:time_to_first_token_seconds_bucket{{{engine},le="1.0"}}', "0+0x480"),
        (f'vllm:time_to_first_token_seconds_bucket{{{engine},le="2.5"}}', "0+60x480"),
        (f"vllm:time_to_first_token_seconds_count{{{engine}}}", "0+60x480"),
        # every prompt above the 1,000-token cap
        (f'vllm:request_prompt_tokens_bucket{{{engine},le="1000.0"}}', "0+0x480"),
        (f"vllm:request_prompt_tokens_count{{{engine}}}", "0+60x480"),
    ]
    deployment = {"job": "vllm", "namespace": "llm", "model_name": "qwen2.5-coder-0.5b"}
    firing = {
        "GoliveTtftBurnRate1h": [{**deployment, "severity": "page", "source": "golive"}],
        "GoliveContextAboveAcceptedCap": [{**deployment, "severity": "ticket", "source": "golive"}],
    }
    run = alerts_fire(out, series, firing, "7h")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_cache_floor_is_productions_own(tmp_path: Path) -> None:
    """The bundle measured its own cache probe's reuse (a prompt sent twice: 0.87 in the
    demo), not the share of production's prompt tokens that hit the cache, so no floor is
    derived from it: without --cache-floor the rule is left out and says why; with the
    production workload's own floor, an engine whose ratio falls below it for 30 minutes
    alerts, one above it does not (at half the probe's 0.87 it alerted on the demo's own
    load windows' ratios, 0.52 to 0.63, at any floor above them)."""
    root = _bundle(tmp_path)
    out = tmp_path / "rules.yml"
    left_out = generate(root, out, ttft_slo_s=10.0)
    assert "GolivePrefixCacheRegression" not in _rules(out)
    assert any(
        x.startswith("GolivePrefixCacheRegression") and "--cache-floor" in x for x in left_out
    )
    generate(root, out, ttft_slo_s=10.0, cache_floor=0.4)
    engine = 'model_name="qwen2.5-coder-0.5b",job="vllm",namespace="llm",instance="i:8000"'
    series = [
        # pod a: 20% of prompt tokens hit the cache; pod b: 60%
        (f'vllm:prefix_cache_queries_total{{{engine},pod="a"}}', "0+1000x90"),
        (f'vllm:prefix_cache_hits_total{{{engine},pod="a"}}', "0+200x90"),
        (f'vllm:prefix_cache_queries_total{{{engine},pod="b"}}', "0+1000x90"),
        (f'vllm:prefix_cache_hits_total{{{engine},pod="b"}}', "0+600x90"),
    ]
    replica = {"job": "vllm", "namespace": "llm", "instance": "i:8000", "pod": "a"}
    firing = {
        "GolivePrefixCacheRegression": [{**replica, "severity": "ticket", "source": "golive"}]
    }
    run = alerts_fire(out, series, firing, "80m")
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("selector", ["job=a{{b", "job=a}}b", 'job={{ query "up" }}'])
def test_template_delimiters_in_a_label_value_stay_text(tmp_path: Path, selector: str) -> None:
    """Prometheus renders annotations as Go templates: a `{{` in a selector value once made
    the whole rules file fail to load (`promtool check rules`: FAILED), and a value that
    is a template ran as one. Every rule loads, and the alert's description shows the value
    as given."""
    out = tmp_path / "rules.yml"
    generate(_bundle(tmp_path), out, ttft_slo_s=10.0, selectors=[selector])
    check = subprocess.run(
        ["promtool", "check", "rules", str(out)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    value = selector.partition("=")[2]
    quoted = value.replace('"', '\\"')
    engine = f'job="{quoted}",model_name="qwen2.5-coder-0.5b",pod="p",instance="i"'
    series = [(f"vllm:num_requests_waiting{{{engine}}}", "50x20")]
    shown = rendered_annotations(out, series, "GoliveQueueBeyondEnvelope", "15m")
    assert f'job="{value}"' in shown["description"]
