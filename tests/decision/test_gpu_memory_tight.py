"""Issue 29 §3 on a real memory-tight GPU deployment (tests/data/vllm-gpu-0.24-memtight-h200x1:
vLLM 0.24 on one H200, 124.94 GiB of weights at --gpu-memory-utilization 0.95): the loaded
model's headroom is a limit, judged again by decide from the bundle, and an edited startup log
or curve does not buy headroom."""

from __future__ import annotations

import csv
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from golive.bundle.layout import MEMORY_CURVE, STARTUP_LOG
from golive.bundle.store import Bundle
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Outcome, Status
from golive.verdict.decide import limits

CAPTURE = Path(__file__).parents[1] / "data/vllm-gpu-0.24-memtight-h200x1/bundle.tgz"


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sealed memory-tight H200 bundle, unpacked once."""
    where = tmp_path_factory.mktemp("tight")
    with tarfile.open(CAPTURE) as packed:
        packed.extractall(where, filter="data")
    return where / "b"


def _memory(checks: tuple[CheckResult, ...] | list[CheckResult]) -> CheckResult:
    return next(c for c in checks if c.id == "capacity.memory")


def test_the_loaded_model_leaves_too_little_of_the_gpu(tight: Path) -> None:
    """The capture re-derives as sealed but for one sentence (sealed by an earlier cut of the
    rule, which said "before any request" of a figure partly read after the smoke and cache
    requests); capacity.memory warns that the loaded model leaves 7.1% of the GPU (under the
    10% minimum) with a 3.9 GiB, 13,520-token cache, and sets no concurrency limit: no
    concurrency makes that room."""
    again = rederive(tight)
    [reworded] = again.problems
    assert reworded.startswith("capacity.memory summary: sealed 'memory limit: GPU0 holds 130.4")
    assert "before any request" in reworded
    assert again.decision.outcome is Outcome.HOLD  # random weights fail the Agent contract
    memory = _memory(again.checks)
    assert memory.status is Status.WARN
    assert memory.measurements["gpu0_load_headroom"] == pytest.approx(0.0715, abs=5e-4)
    assert memory.measurements["gpu0_headroom"] == pytest.approx(0.0244, abs=5e-4)
    assert "GPU0 holds 130.4 of its 140.4 GiB for the loaded model outside its KV cache" in (
        memory.summary
    )
    assert "leaving the KV cache 3.9 GiB (13,520 tokens): no concurrency makes room" in (
        memory.summary
    )
    assert memory.limits.max_concurrency is None
    assert limits(again.checks).max_concurrency is None
    assert "capacity.memory" in {i for r in again.decision.rules_fired for i in r.check_ids}


@pytest.mark.tampers_bundle
def test_a_larger_pool_written_into_the_log_buys_no_headroom(tight: Path, tmp_path: Path) -> None:
    """The log edited to a 13.87 GiB pool (so that less of the GPU seems the model's) and
    re-sealed: the pool and the weights no longer fit what NVML saw the GPU hold — no_data,
    never a pass."""
    root = tmp_path / "b"
    shutil.copytree(tight, root)
    log = (root / STARTUP_LOG).read_text()
    assert "Available KV cache memory: 3.87 GiB" in log
    (root / STARTUP_LOG).write_text(
        log.replace("Available KV cache memory: 3.87 GiB", "Available KV cache memory: 13.87 GiB")
    )
    Bundle(root).seal()
    memory = _memory(rederive(root).checks)
    assert memory.status is Status.NO_DATA
    assert "the curve, the inventory and the startup log are not one GPU's" in memory.summary


@pytest.mark.tampers_bundle
def test_a_curve_lowered_by_three_gib_still_shows_the_launch_budget(
    tight: Path, tmp_path: Path
) -> None:
    """Every NVML reading lowered by 3 GiB (still above what the engine printed it allocated)
    and re-sealed: the launch's own budget, 0.95 of the GPU less the pool it printed, still
    leaves 7.8% — the curve alone cannot lift the limit."""
    root = tmp_path / "b"
    shutil.copytree(tight, root)
    rows = list(csv.DictReader(io.StringIO((root / MEMORY_CURVE).read_text())))
    for row in rows:
        if row["gpu0_used_mib"]:
            row["gpu0_used_mib"] = str(float(row["gpu0_used_mib"]) - 3072)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (root / MEMORY_CURVE).write_text(out.getvalue())
    Bundle(root).seal()
    memory = _memory(rederive(root).checks)
    assert memory.status is Status.WARN
    assert memory.measurements["gpu0_load_headroom"] == pytest.approx(
        1 - (0.95 * 143771 - 3.87 * 1024) / 143771, abs=1e-4
    )
