"""Issue 18: `golive decide` judges a family again from the bundle's evidence and names each
way a re-judged check differs from the sealed one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from golive.bundle.layout import CACHE_PROTOCOL, CACHE_STEPS, CAPACITY_STEPS
from golive.bundle.store import BundleReader
from golive.checks.cache import judge_cache
from golive.checks.cache.judge import cache_from_steps
from golive.checks.capacity.judge import ramp_from_steps
from golive.checks.capacity.model_load import judge_model_load
from golive.config import GoliveConfig
from golive.errors import BundleError
from golive.orchestration.rederive import differences
from golive.profiles import load_profile
from golive.results import CheckClass, CheckResult, Status
from golive.verdict.document import VerdictDocument

DATA = Path(__file__).parents[1] / "data"


def _check(status: Status = Status.PASS, summary: str = "ok", **m: float | None) -> CheckResult:
    return CheckResult("cache.prefix_reuse", CheckClass.CACHE, True, status, summary, m)


@pytest.mark.parametrize(
    ("sealed", "again", "named"),
    [
        ([_check(hits=3.0)], [_check(hits=3.0)], []),
        (
            [_check(hits=1536.0)],
            [_check(Status.FAIL, hits=0.0)],
            [
                "cache.prefix_reuse status: sealed 'pass', re-derived 'fail'",
                "cache.prefix_reuse measurements.hits: sealed 1536.0, re-derived 0.0",
            ],
        ),
        # a measurement that was not measured stays None; one that disappeared is named
        (
            [_check(hits=None)],
            [_check()],
            ["cache.prefix_reuse measurements.hits: sealed None, re-derived 'absent'"],
        ),
        ([_check()], [], ["cache.prefix_reuse: sealed only (pass)"]),
        ([], [_check()], ["cache.prefix_reuse: re-derived only (pass)"]),
    ],
)
def test_differences_name_check_field_and_both_values(
    sealed: list[CheckResult], again: list[CheckResult], named: list[str]
) -> None:
    """Each difference between sealed and re-judged checks names the check, the field and both
    values."""
    assert differences(sealed, again) == named


def _bundle(root: Path, protocol: object | None, steps: list[dict[str, object]]) -> BundleReader:
    (root / "metrics").mkdir(parents=True)
    if protocol is not None:
        (root / CACHE_PROTOCOL).write_text(json.dumps(protocol))
    (root / CACHE_STEPS).write_text("".join(json.dumps(s) + "\n" for s in steps))
    return BundleReader(root)


def test_missing_cache_evidence_is_no_data_naming_the_file(tmp_path: Path) -> None:
    """With the cache evidence gone the judge says no_data naming the missing file."""
    (only,) = judge_cache(_bundle(tmp_path, None, []), load_profile("generic"))
    assert only.status is Status.NO_DATA
    assert CACHE_PROTOCOL in only.summary


def test_a_collector_that_stopped_says_why(tmp_path: Path) -> None:
    """A cache collector that stopped early is judged no_data with its own reason."""
    protocol = {"problem": "no served model: /v1/models did not answer"}
    (only,) = judge_cache(_bundle(tmp_path, protocol, []), load_profile("generic"))
    assert only.status is Status.NO_DATA
    assert only.summary == "no served model: /v1/models did not answer"


def test_the_h200_steps_judge_from_files_alone(tmp_path: Path) -> None:
    """vLLM 0.24 on two H200s (16-token blocks in the engine's cache_config_info): the warm
    requests reused 1,008 tokens by the engine's counters — judged from the files alone."""
    steps = [
        json.loads(x)
        for x in (DATA / "vllm-gpu-0.24-h200x2/cache-steps.jsonl").read_text().splitlines()
    ]
    protocol = {
        "target_tokens": 1024,
        "calibration": "measured with /tokenize",
        "controls": ["system_prompt", "whitespace", "tool_schema", "tool_order", "serialization"],
        "startup": {"attention_block_size": 16, "prefix_caching": True},
    }
    # the capture holds the steps, not the scrapes behind them: judged from the steps
    reuse, controls, retention = cache_from_steps(
        _bundle(tmp_path, protocol, steps), load_profile("generic"), protocol, steps
    )
    assert reuse.status is Status.PASS, reuse.summary
    assert reuse.measurements["block_size"] == 16
    assert "the API reports no cached_tokens" in reuse.summary
    assert "system_prompt: invalidated" in controls.summary
    assert "block-granular (16-token blocks)" in retention.summary


def test_an_unreadable_evidence_line_names_the_file_and_line(tmp_path: Path) -> None:
    """An evidence line that is not JSON is refused naming the file and line."""
    reader = _bundle(tmp_path, {"target_tokens": 1}, [{"step": "cold-0"}])
    with (tmp_path / CACHE_STEPS).open("a") as steps:
        steps.write("{not json\n")
    with pytest.raises(BundleError, match=r"cache-steps\.jsonl:2: not a JSON line"):
        reader.jsonl(CACHE_STEPS)


def test_the_h200_ramp_rejudged_from_its_steps_equals_the_sealed_check(tmp_path: Path) -> None:
    """The H200 tier run (vLLM 0.24, TP=2, c64): capacity.concurrency judged again from
    `metrics/capacity-steps.jsonl` alone gives the sealed check, but for the knee: sealed
    under the one-standard-error rule for a single window a side (16 -> 32 bought 1.14x,
    ±0.03: limited to 16), it is inside counting noise at 95% (±0.06 reaches 1.2x), as the
    two other ramps of the same server and the repeats say (test_knee_repeats)."""
    tier = DATA / "vllm-gpu-0.24-h200x2-tier"
    (tmp_path / "metrics").mkdir()
    shutil.copy(tier / "capacity-steps.jsonl", tmp_path / CAPACITY_STEPS)
    verdict = VerdictDocument.read(tier)
    sealed = [c for c in verdict.results() if c.id == "capacity.concurrency"]
    rows = [json.loads(x) for x in (tier / "capacity-steps.jsonl").read_text().splitlines()]
    # the capture holds the steps, not the records and scrapes behind them
    again = ramp_from_steps(rows, GoliveConfig().capacity)
    # sealed by an earlier golive: the API-server finding has since been worded by Little's
    # law (the time outside the engine, now a measurement per step); the rest is unchanged
    knee = ("status", "classification", "ceiling", "limit_max_concurrency")
    drift = (
        "summary",
        "measurements.api_server_bound",
        "_outside_engine_ms: sealed 'absent'",
        *knee,
    )
    assert [d for d in differences(sealed, [again]) if not any(k in d for k in drift)] == []
    assert "grew from 21 ms at concurrency 1 to 162 ms" in again.summary
    assert again.status is Status.PASS, again.summary
    assert again.measurements["ceiling"] == 32  # the ramp's top
    # an edited step is named: the c16 step's queue made ten seconds long
    edited = [{**r, "queue_mean_s": 10.0} if r["concurrency"] == 16 else r for r in rows]
    changed = differences([again], [ramp_from_steps(edited, GoliveConfig().capacity)])
    assert "capacity.concurrency measurements.ceiling: sealed 32, re-derived 8" in changed
    assert any(c.startswith("capacity.concurrency summary: sealed ") for c in changed)


def test_the_chain_judge_owns_exactly_the_checks_its_rules_return() -> None:
    """`golive decide` replaces the sealed chain checks by id: the ids it owns must be the
    ones the rules produce, in order; the NCCL transport only where there is something to
    judge (here, a TP=4 engine across two nodes of two GPUs), so a one-node bundle sealed
    before it re-derives as sealed."""
    from golive.checks.env.chain_inputs import ChainInputs
    from golive.checks.env.judge import CHAIN_CHECKS, chain_results
    from golive.evidence.facts import HostInfo
    from golive.evidence.startup_log import parse_startup_log
    from tests.helpers.nccl_logs import spanning_layout

    generic = load_profile("generic")
    ids = [c.id for c in chain_results(ChainInputs(profile=generic))]
    assert tuple(ids) == tuple(c for c in CHAIN_CHECKS if c != "environment.nccl_transport")
    host = HostInfo.model_validate_json((DATA / "gpu-h200-x2/host-nvml.json").read_text())
    hosts = tuple((host.model_copy(update={"node": n}), f"environment/host-{n}.json") for n in "ab")
    log = spanning_layout((DATA / "vllm-gpu-0.24-h200x2/startup.log").read_text())
    spanning = ChainInputs(profile=generic, hosts=hosts, startup=parse_startup_log(log))
    assert tuple(c.id for c in chain_results(spanning)) == CHAIN_CHECKS


@pytest.mark.parametrize(
    ("log", "status", "measured"),
    [
        # the H200 engine's own account of loading the model (TP=2, torch.compile, graphs)
        (
            DATA / "vllm-gpu-0.24-h200x2/startup.log",
            Status.PASS,
            {"parallel_tp": 2, "compile_s": 22.84, "kv_cache_tokens": 11_594_864},
        ),
        # the CPU engine: weights and init times, no GPU figures (never written as 0)
        (DATA / "vllm-cpu-0.32/startup.log", Status.PASS, {"cuda_graph_gib": None}),
        # a CUDA out-of-memory during load is a model that did not load: fail, not traffic
        (DATA / "gpu-h200-x2/torch_oom_message.txt", Status.FAIL, {}),
    ],
    ids=["h200", "cpu", "oom"],
)
def test_model_load_is_judged_from_the_saved_startup_log(
    tmp_path: Path, log: Path, status: Status, measured: dict[str, object]
) -> None:
    """capacity.model_load reads what the engine printed and the load curve from the bundle,
    so `golive decide` gives it again."""
    (tmp_path / "environment").mkdir()
    (tmp_path / "memory").mkdir()
    shutil.copy(log, tmp_path / "environment/startup.log")
    (tmp_path / "memory/load.csv").write_text("t_s,host_rss_mib\n0.0,812.5\n1.0,2048.25\n")
    result = judge_model_load(BundleReader(tmp_path))
    assert result.status is status, result.summary
    assert result.measurements["peak_load_rss_mib"] == 2048.25
    assert result.measurements["load_curve_points"] == 2
    for key, value in measured.items():
        assert result.measurements[key] == value
    if status is Status.PASS:
        assert "peak 2048 MiB host RSS" in result.summary
        assert result.measurements["weights_load_s"] is not None


def test_model_load_without_a_startup_log_is_no_data(tmp_path: Path) -> None:
    """No log saved: the load's memory and timing are unknown, never 0."""
    result = judge_model_load(BundleReader(tmp_path))
    assert result.status is Status.NO_DATA
    assert "pass --log" in result.summary
