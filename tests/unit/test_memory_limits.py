"""Issue 29 §3, memory as a limit: what the loaded model leaves of each GPU before any request
(its budget less the KV pool) against `capacity.min_memory_headroom`, and — where the
sustained load lacked headroom — the highest ramp step that kept it, as the verdict's
concurrency limit. On real H200 captures (vLLM 0.24) and curves edited from them."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from golive.bundle.layout import (
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    MEMORY_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory import judge_memory
from golive.checks.capacity.memory_limits import (
    StepSpare,
    concurrency_cap,
    load_needed_mib,
    step_spares,
)
from golive.config import GoliveConfig
from golive.evidence.startup_log import parse_startup_log
from golive.results import CheckResult, Status
from golive.verdict.decide import limits
from tests.unit.test_capacity_memory import gpu_run

DATA = Path(__file__).parents[1] / "data"
DEFAULT_UTIL = DATA / "vllm-gpu-0.24-h200x1-util09"  # one H200 at vLLM's default 0.9
WHOLE_RUN = DATA / "vllm-gpu-0.24-h200x1-bundle" / "bundle.tgz"  # ramp 1..16, sustained c16
H200_MIB = 143771


def judged(root: Path, **capacity: float) -> CheckResult:
    config = GoliveConfig.model_validate(
        {"target": {"url": "http://127.0.0.1:8000"}, "capacity": capacity}
    )
    [result] = judge_memory(BundleReader(root), config)
    return result


def default_util_run(tmp_path: Path, log: str | None = None) -> Path:
    """The H200 run at 0.9, as its bundle kept what capacity.memory reads (its startup log
    replaced by `log`)."""
    root = gpu_run(tmp_path)
    if log is not None:
        (root / STARTUP_LOG).write_text(log)
    return root


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("whole")
    with tarfile.open(WHOLE_RUN) as packed:
        packed.extractall(where, filter="data")
    return where / "b"


def with_kv(whole_run: Path, tmp_path: Path, usage: dict[str, float]) -> Path:
    """The whole H200 run with the KV cache usage of each window's curve rows set: `usage`
    maps a window (`c1`, ..., `sustained`) to the usage every sample of its rows reads."""
    root = tmp_path / "b"
    shutil.copytree(whole_run, root)
    spans = {
        f"c{row['concurrency']}": row["curve_rows"]
        for row in BundleReader(root).jsonl(CAPACITY_STEPS)
    }
    spans["sustained"] = json.loads((root / CAPACITY_SUSTAINED).read_text())["curve_rows"]
    rows = list(csv.DictReader(io.StringIO((root / MEMORY_CURVE).read_text())))
    for window, value in usage.items():
        first, last = spans[window]
        for row in rows[first:last]:
            row["kv_cache_usage_perc"] = str(value)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (root / MEMORY_CURVE).write_text(out.getvalue())
    return root


@pytest.mark.parametrize(
    ("utilization", "first", "needed"),
    [
        (0.9, 128000.0, 0.9 * H200_MIB - 124826),  # the budget's peak above NVML's idle floor
        (0.9, 130290.0, 130290.0 - 124826),  # the real run: NVML above the budget (CUDA context)
        (None, 130290.0, 130290.0 - 124826),  # a fixed pool: NVML's reading alone
        (0.9, None, 0.9 * H200_MIB - 124826),
        (None, None, None),
    ],
)
def test_what_the_loaded_model_needs(
    utilization: float | None, first: float | None, needed: float | None
) -> None:
    """The loaded model's need is the launch's budget less the pool, floored by what NVML saw
    held less the pool: the larger of what is known, nothing where neither is."""
    got = load_needed_mib(H200_MIB, 124826, utilization, first)
    assert got == (None if needed is None else pytest.approx(needed))


@pytest.mark.parametrize(
    ("spares", "below", "cap"),
    [
        ([(1, 0.9), (2, 0.8), (4, 0.5), (8, 0.05)], 16, 4),
        ([(1, 0.9), (2, 0.8), (4, 0.5), (8, 0.5)], 8, 4),  # not at or above the sustained level
        ([(1, 0.9), (2, None), (4, 0.5)], 16, 1),  # an unmeasured step stops the chain
        ([(1, 0.05), (2, 0.8)], 16, None),  # the first step already lacked it
        ([(4, 0.5), (1, 0.9), (2, 0.05)], 16, 1),  # judged in concurrency order
        ([], 16, None),
    ],
)
def test_the_highest_step_that_kept_headroom(
    spares: list[tuple[int, float | None]], below: int, cap: int | None
) -> None:
    """A candidate ceiling is shown only by levels that each kept the minimum, from the lowest
    up, under the sustained level."""
    steps = [StepSpare(level, spare) for level, spare in spares]
    assert concurrency_cap(steps, 0.1, below) == cap


def test_the_real_h200_load_leaves_most_of_the_gpu(tmp_path: Path) -> None:
    """vLLM's default 0.9 on one H200 with a 0.5B-shaped model: before any request the loaded
    model needs 10% of the GPU less the 121.9 GiB pool — 3.8% held, 96% spare: no limit."""
    result = judged(default_util_run(tmp_path))
    assert result.status is Status.PASS, result.summary
    assert result.measurements["gpu0_load_headroom"] == pytest.approx(
        1 - (130289.9375 - 124826) / H200_MIB, abs=1e-3
    )
    assert result.limits.max_concurrency is None


def test_a_model_filling_the_gpu_at_load_is_a_limit_no_concurrency_lifts(tmp_path: Path) -> None:
    """The same run's log as a 115 GiB model at the Kimi K3 recipe's 0.95 would print it (a
    6 GiB KV pool): 9.3% of the GPU is spare before any request, under the 10% minimum — a
    limit that names the pool it leaves and what makes room, and no concurrency limit."""
    log = (DEFAULT_UTIL / "startup.log").read_text()
    for old, new in (
        ("Model loading took 1.18 GiB", "Model loading took 115.00 GiB"),
        ("Available KV cache memory: 121.9", "Available KV cache memory: 6.0"),
        ("'gpu_memory_utilization': 0.9", "'gpu_memory_utilization': 0.95"),
    ):
        assert old in log, old
        log = log.replace(old, new)
    result = judged(default_util_run(tmp_path, log))
    assert result.status is Status.WARN
    assert "GPU0 holds 127.4 of its 140.4 GiB for the loaded model outside its KV cache" in (
        result.summary
    )
    assert "9.3% spare, under the 10% capacity.min_memory_headroom" in result.summary
    assert "leaving the KV cache 6.0 GiB" in result.summary
    assert result.limits.max_concurrency is None
    assert limits([result]).to_json() == {}
    # a config that lowers the minimum to 5% (a relaxation with an owner) holds it within
    assert judged(default_util_run(tmp_path / "w", log), min_memory_headroom=0.05).status is (
        Status.PASS
    )


@pytest.mark.tampers_bundle
def test_a_full_cache_under_sustained_load_names_the_level_that_kept_room(
    whole_run: Path, tmp_path: Path
) -> None:
    """The whole H200 run (0.5 reserved) with the cache full from c8 up and at sustained c16,
    judged under a 55% minimum: the load filled what the launch reserved; the ramp's windows
    up to c4 (each ~94% spare) are named as a candidate ceiling to hold under sustained load,
    not set as the verdict's limit — each was seconds long."""
    root = with_kv(
        whole_run,
        tmp_path,
        {"c1": 0.05, "c2": 0.05, "c4": 0.05, "c8": 0.97, "c16": 0.97, "sustained": 0.97},
    )
    result = judged(root, min_memory_headroom=0.55)
    assert result.status is Status.WARN
    assert result.measurements["memory_candidate_concurrency"] == 4
    c4, c8 = (result.measurements[f"c{n}_gpu_headroom"] for n in (4, 8))
    assert isinstance(c4, float)
    assert isinstance(c8, float)
    assert c4 > 0.9
    assert c8 < 0.55
    assert "the ramp's windows up to c4 kept at least 55% spare, each for seconds" in (
        result.summary
    )
    assert "run again with --concurrency 4" in result.summary
    assert limits([result]).to_json() == {}


@pytest.mark.tampers_bundle
def test_no_level_that_kept_headroom_names_none(whole_run: Path, tmp_path: Path) -> None:
    """With the cache full from the first step, no concurrency was shown to make room: the
    warn says so and names no level."""
    full = dict.fromkeys(("c1", "c2", "c4", "c8", "c16", "sustained"), 0.97)
    result = judged(with_kv(whole_run, tmp_path, full), min_memory_headroom=0.55)
    assert result.status is Status.WARN
    assert "no ramp level under the sustained c16 was measured keeping 55% spare" in (
        result.summary
    )
    assert "memory_candidate_concurrency" not in result.measurements


def _curve(rows: list[tuple[str, float, float]]) -> str:
    """A curve of (phase, GPU0 MiB, KV usage) rows on a 100,000 MiB GPU."""
    lines = ["t_s,phase,gpu0_used_mib,kv_cache_usage_perc"]
    lines += [f"{i},{phase},{used},{kv}" for i, (phase, used, kv) in enumerate(rows)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("windows", "expected"),
    [
        # one window per level, each read from its own rows
        ([(1, [0, 2]), (2, [2, 4])], [(1, 0.9), (2, 0.1)]),
        # a knee repeat (or a second row) at a level: the worst of its windows counts
        ([(1, [0, 2]), (1, [2, 4])], [(1, 0.1)]),
        ([(1, [2, 4]), (1, [0, 2])], [(1, 0.1)]),
        # rows of another phase are not the window's: unmeasured, whatever they read
        ([(1, [4, 6])], [(1, None)]),
        ([(1, [0, 2]), (1, [4, 6])], [(1, None)]),
        # a level below one, or rows outside the curve
        ([(0, [0, 2]), (1, [0, 9])], [(1, None)]),
    ],
)
def test_each_level_is_judged_at_its_worst_window(
    windows: list[tuple[int, list[int]]], expected: list[tuple[int, float | None]]
) -> None:
    """A level's headroom is the least of its windows (ramp step and knee repeats), each
    read only from the ramp's own rows."""
    curve = _curve(
        [
            ("concurrency", 50000.0, 0.0),
            ("concurrency", 50000.0, 0.0),  # 50% held, the 40,000 MiB pool unused: 90% spare
            ("concurrency", 50000.0, 1.0),
            ("concurrency", 90000.0, 1.0),  # 90% held, the pool full: 10% spare
            ("long_input", 10000.0, 0.0),
            ("long_input", 10000.0, 0.0),
        ]
    )
    rows = [{"concurrency": level, "curve_rows": span} for level, span in windows]
    got = step_spares(rows, curve, [(0, 100000.0)], 40000.0)
    assert [(s.concurrency, None if s.spare is None else round(s.spare, 4)) for s in got] == (
        expected
    )


def test_the_whole_run_as_captured_has_no_memory_limit(whole_run: Path) -> None:
    """The run as sealed (the cache barely used): a pass naming no level, under the default
    minimum and under a 55% one."""
    for minimum in (0.1, 0.55):
        result = judged(whole_run, min_memory_headroom=minimum)
        assert result.status is Status.PASS, result.summary
        assert "memory_candidate_concurrency" not in result.measurements


def test_each_pipeline_stage_prints_its_own_pool_and_the_least_is_every_gpus() -> None:
    """With pipeline parallel each stage prints its weights and KV pool; vLLM allocates the
    least pool on every GPU, and the largest weights are what a GPU of the engine holds —
    not the last lines printed (a stage printing a larger pool later bought headroom)."""
    log = (DEFAULT_UTIL / "startup.log").read_text()
    pool = "Available KV cache memory: 121.9"
    load = "Model loading took 1.18 GiB"
    assert pool in log
    assert load in log
    staged = log.replace(
        pool,
        "Available KV cache memory: 3.87 GiB\n(Worker_PP1) INFO Available KV cache memory: 7.9",
    ).replace(
        load, "Model loading took 124.94 GiB memory and 2.0 seconds\n(Worker_PP1) INFO " + load
    )
    facts = parse_startup_log(staged)
    assert facts.available_kv_gib == 3.87
    assert facts.model_load_gib == 124.94
