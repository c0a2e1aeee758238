"""Issue 27 §6 on a GPU bundle: `golive run` against vLLM 0.24.0 on one H200 (random weights,
hermes parser; tests/data/vllm-gpu-0.24-h200x1-bundle) re-derives as sealed with nothing
taken on its word, and the forgeries that matter most on a fast engine's thousands of records
are caught: a bundle of only its verdict, ramp records rewritten as failures, a frozen
exporter during one step. A run sealed two days earlier, before rules it lacks evidence for
(tests/data/vllm-gpu-0.24-h200x1-evidence), is judged by them, not by its own word."""

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
from golive.orchestration.rederive import rederive
from golive.results import Outcome, Status

WHOLE_RUN = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-bundle/bundle.tgz"
EARLIER = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-evidence/bundle.tgz"


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sealed H200 bundle, unpacked once."""
    where = tmp_path_factory.mktemp("h200")
    with tarfile.open(WHOLE_RUN) as packed:
        packed.extractall(where, filter="data")
    return where / "b"


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
    twin asked the engine under its own name, and vLLM returned the prompt it rendered both
    ways (`prompt_token_ids`), the same tokens, so each class is held by the prompt itself,
    not its count; the engine's own metrics counted the smoke requests under that name.
    decide agrees; one token of a gateway answer's prompt changed (a rewrite keeping the
    length) is named; with the engine's /v1/models answer deleted and the bundle re-sealed,
    the metrics are no longer read as passed."""
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
    held = {x["label"]: x["response"]["prompt_token_ids"] for x in lines if "@" in x["label"]}
    assert len(held["long_context@target"]) == 3571
    assert held["shared_prompt-1@target"] == held["shared_prompt-1@engine"]
    summaries = " ".join(c.summary for c in again.checks)
    assert "by prompt-token count only" not in summaries
    rewritten = tmp_path / "rewritten"
    shutil.copytree(root, rewritten)
    path = rewritten / "requests/smoke-classes.jsonl"
    edited = []
    for line in lines:
        if line["label"] == "shared_prompt-1@target":
            ids = line["response"]["prompt_token_ids"]
            ids[20] += 1  # one word for another: the count unchanged
        edited.append(json.dumps(line))
    path.write_text("\n".join(edited) + "\n")
    Bundle(rewritten).seal()
    caught = {c.id: c for c in rederive(rewritten).checks}["smoke.shared_prompt"]
    assert caught.status is Status.FAIL
    assert "first different at token 20 (as many tokens, other ones" in caught.summary
    (root / "requests/engine-identity.jsonl").unlink()
    Bundle(root).seal()
    deleted = rederive(root)
    assert not deleted.agrees
    assert {c.id: c.status for c in deleted.checks}["smoke.metrics"] is not Status.PASS


@pytest.mark.tampers_bundle
def test_a_run_sealed_before_todays_rules_is_judged_by_them(tmp_path: Path) -> None:
    """The H200 run of 2026-12-02 was sealed before its windows named the memory-curve rows
    their gauge figures came from, before the completeness and memory rules, and before
    non-critical Agent failures had a bounded share. decide does not judge it by those
    older rules on the bundle's say-so: its windows' gauge figures stand on nothing
    (no_data: hold), the rules' checks are re-derived, the failures are no longer bounded."""
    with tarfile.open(EARLIER) as packed:
        packed.extractall(tmp_path, filter="data")
    again = rederive(tmp_path / "gpurun")
    assert not again.agrees
    assert again.sealed is Outcome.HOLD  # random weights: it was hold already
    status = {c.id: c.status for c in again.checks}
    assert status["capacity.concurrency"] is Status.NO_DATA
    assert status["capacity.sustained"] is Status.NO_DATA
    assert "missing-evidence" in [r.rule for r in again.decision.rules_fired]
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert "states the engine's gauges but names no curve rows" in ramp.summary
    problems = "\n".join(again.problems)
    for rule in ("capacity.memory", "agent.coverage", "smoke.coverage"):
        assert f"{rule}: re-derived only" in problems, rule
    assert "agent.one_arg.auto status: sealed 'warn', re-derived 'fail'" in problems


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


@pytest.mark.tampers_bundle
def test_a_gateway_is_known_from_its_records_not_only_the_config(tmp_path: Path) -> None:
    """A hostile review's case on the real gateway bundle: `engine_url` removed from the
    saved config, every engine answer deleted and the ledger's count corrected, re-sealed.
    The requests through the gateway still asked for the engine's prompt (only golive's
    gateway mode asks): each class is held to an engine answer that is gone, so none
    passes."""
    with tarfile.open(GATEWAY) as packed:
        packed.extractall(tmp_path, filter="data")
    root = tmp_path / "g"
    config = root / "config/effective.yaml"
    config.write_text(
        "\n".join(x for x in config.read_text().splitlines() if "engine_url" not in x) + "\n"
    )
    path = root / "requests/smoke-classes.jsonl"
    lines = path.read_text().splitlines()
    kept = [x for x in lines if not json.loads(x)["label"].endswith("@engine")]
    path.write_text("\n".join(kept) + "\n")
    ledger = root / "metrics/ledger.json"
    sent = json.loads(ledger.read_text())
    ledger.write_text(json.dumps({**sent, "sent": sent["sent"] - (len(lines) - len(kept))}))
    Bundle(root).seal()
    again = rederive(root)
    status = {c.id: c.status for c in again.checks}
    assert status["smoke.long_context"] is Status.NO_DATA
    assert status["smoke.shared_prompt"] is Status.NO_DATA
    assert again.decision.outcome is Outcome.HOLD


@pytest.mark.tampers_bundle
def test_an_answer_names_the_model_its_bytes_name(gpu_bundle: Path, tmp_path: Path) -> None:
    """A hostile review's case: a streamed answer whose bytes name another model, with only
    the saved copy's `model` set back to the one asked: target.identity reads the bytes
    every other judge reads, so it is another model answering, critical."""
    root = _copy(gpu_bundle, tmp_path)
    path = root / "requests/smoke-classes.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    streamed = next(x for x in lines if x.get("response_raw") and "model" in x["response"])
    asked = streamed["response"]["model"]
    streamed["response_raw"] = streamed["response_raw"].replace(
        f'"model":"{asked}"', '"model":"other-model"'
    )
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    Bundle(root).seal()
    identity = next(c for c in rederive(root).checks if c.id == "target.identity")
    assert identity.status is Status.FAIL
    assert "other-model" in identity.summary
