"""Issue 27 §6 on a GPU bundle: `golive run` against vLLM 0.24.0 on one H200 (random weights,
hermes parser; tests/data/vllm-gpu-0.24-h200x1-evidence) re-derives as sealed with nothing
taken on its word, and the forgeries that matter most on a fast engine's thousands of records
are caught: a bundle of only its verdict, ramp records rewritten as failures, a frozen
exporter during one step."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_SUSTAINED,
    POLICY,
    VERDICT,
)
from golive.bundle.store import ZSTD, Bundle, read_lines
from golive.results import Outcome, Status
from golive.verdict.rederive import rederive

CAPTURE = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-evidence"


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sealed H200 bundle, unpacked once."""
    where = tmp_path_factory.mktemp("h200")
    with tarfile.open(CAPTURE / "bundle.tgz") as packed:
        packed.extractall(where, filter="data")
    return where / "gpurun"


def _copy(gpu_bundle: Path, tmp_path: Path) -> Path:
    root = tmp_path / "b"
    shutil.copytree(gpu_bundle, root)
    return root


def test_the_h200_run_rederives_as_sealed(gpu_bundle: Path) -> None:
    """Every family judged again from the H200 evidence; the engine's identity is in it."""
    again = rederive(gpu_bundle)
    assert again.problems == ()
    assert again.as_sealed == ()
    assert again.decision.outcome is Outcome.HOLD  # random weights: the Agent contract fails
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status is Status.PASS  # a fast engine's metrics move with the load
    identity = json.loads((gpu_bundle / VERDICT).read_text())["identity"]
    assert identity["vllm_version"] == "0.24.0"
    assert identity["process_start"] is not None
    assert identity["problems"] == []


@pytest.mark.tampers_bundle
def test_only_its_verdict_holds(gpu_bundle: Path, tmp_path: Path) -> None:
    """verdict.json and the policy alone: every family named as missing, hold."""
    root = tmp_path / "b"
    (root / "config").mkdir(parents=True)
    shutil.copy(gpu_bundle / VERDICT, root / VERDICT)
    shutil.copy(gpu_bundle / POLICY, root / POLICY)
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert again.decision.outcome is Outcome.HOLD
    assert sum("is missing from the bundle" in p for p in again.problems) >= 5


@pytest.mark.tampers_bundle
def test_ramp_records_rewritten_as_failures_are_caught(gpu_bundle: Path, tmp_path: Path) -> None:
    """Thousands of ramp records rewritten as HTTP 500 under the untouched step rows."""
    root = _copy(gpu_bundle, tmp_path)
    source = root / (CAPACITY_CONCURRENCY_REQUESTS + ZSTD)
    lines = [json.loads(line) for line in read_lines(source) if line.strip()]
    source.unlink()
    failed = [{**r, "http_status": 500} for r in lines]
    (root / CAPACITY_CONCURRENCY_REQUESTS).write_text("".join(json.dumps(r) + "\n" for r in failed))
    Bundle(root).seal()
    again = rederive(root)
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status is Status.NO_DATA
    assert "does not match the request records behind it" in ramp.summary
    assert not again.agrees


@pytest.mark.tampers_bundle
def test_a_frozen_exporter_during_one_step_is_caught(gpu_bundle: Path, tmp_path: Path) -> None:
    """The c8 step's after-scrape replaced by its before-scrape."""
    root = _copy(gpu_bundle, tmp_path)
    metrics = root / "metrics"
    shutil.copy(metrics / "capacity-c8-before.prom", metrics / "capacity-c8-after.prom")
    Bundle(root).seal()
    again = rederive(root)
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status is Status.NO_DATA
    assert "metrics frozen or from another engine: c8:" in ramp.summary


@pytest.mark.tampers_bundle
def test_a_sustained_row_moved_to_another_level_is_caught(gpu_bundle: Path, tmp_path: Path) -> None:
    """The sustained window's level edited (its label and records untouched): a row golive
    never writes, so the window is not judged from it, whatever limit the new level gives."""
    root = _copy(gpu_bundle, tmp_path)
    path = root / CAPACITY_SUSTAINED
    row = json.loads(path.read_text())
    path.write_text(json.dumps({**row, "concurrency": row["concurrency"] * 8}))
    Bundle(root).seal()
    again = rederive(root)
    sustained = next(c for c in again.checks if c.id == "capacity.sustained")
    assert sustained.status is Status.NO_DATA
    assert f"but its label is 'c{row['concurrency']}'" in sustained.summary
    assert not again.agrees


GATEWAY = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-gateway/gateway-bundle.tgz"


@pytest.mark.tampers_bundle
def test_a_real_aliasing_gateway_is_held_to_the_real_engine(tmp_path: Path) -> None:
    """vLLM 0.24 on an H200 behind a gateway serving its model as `kimi`: every class's engine
    twin asked the engine under its own name and the engine counted the same prompt tokens
    both ways; the engine's own metrics counted the smoke requests under that name. decide
    agrees; with the engine's /v1/models answer deleted and the bundle re-sealed, the
    metrics are no longer read as passed."""
    with tarfile.open(GATEWAY) as packed:
        packed.extractall(tmp_path, filter="data")
    root = tmp_path / "g"
    again = rederive(root)
    assert again.agrees, again.problems
    status = {c.id: c.status for c in again.checks}
    assert status["smoke.metrics"] is Status.PASS
    assert status["smoke.long_context"] is Status.PASS
    assert status["smoke.shared_prompt"] is Status.PASS
    assert status["smoke.tools_structured"] is Status.FAIL  # random weights, both ways
    lines = [
        json.loads(x) for x in (root / "requests/smoke-classes.jsonl").read_text().splitlines()
    ]
    asked = {x["label"]: x["request"]["model"] for x in lines if "@" in x["label"]}
    assert {m for label, m in asked.items() if label.endswith("@engine")} == {"qwen-gpu"}
    assert {m for label, m in asked.items() if label.endswith("@target")} == {"kimi"}
    (root / "requests/engine-identity.jsonl").unlink()
    Bundle(root).seal()
    deleted = rederive(root)
    assert not deleted.agrees
    assert {c.id: c.status for c in deleted.checks}["smoke.metrics"] is not Status.PASS


WHOLE_RUN = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-bundle/bundle.tgz"


@pytest.mark.tampers_bundle
def test_a_calibration_that_raises_the_stall_bar_is_caught(tmp_path: Path) -> None:
    """The H200 run's calibration set the silence that is a stall at 20 s from its 61
    answers; the calibration record edited to say 40 s (so a longer silence would pass as
    none), re-sealed, is named: decide reads the bar from the calibration's own records."""
    with tarfile.open(WHOLE_RUN) as packed:
        packed.extractall(tmp_path, filter="data")
    root = tmp_path / "b"
    assert rederive(root).agrees
    path = root / "metrics/capacity-calibration.json"
    calibration = json.loads(path.read_text())
    assert calibration["stall_after_s"] == 20.0
    path.write_text(json.dumps({**calibration, "stall_after_s": 40.0}))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status is Status.NO_DATA
    assert "capacity-calibration.json: stall_after_s 40.0, but the calibration's" in ramp.summary
