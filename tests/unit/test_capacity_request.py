"""The capacity request written with an expand-capacity verdict (issue 28 §2): every figure
from the bundle's evidence with its source, the replicas and GPUs a stated need takes, and
nothing invented where the evidence is silent. The evidence is the real CPU demo bundle
(its startup log, `/metrics` cache config and ramp steps) with an expand-capacity ramp check.

Checklist: "document memory assumptions, network constraints, and fallback capacity before
requesting additional resources".
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from golive.bundle.store import BundleReader
from golive.orchestration.rederive import request_differences
from golive.report.capacity_request import capacity_request, render_capacity_request
from golive.results import CheckClass, CheckResult, Classification, Outcome, Status

GOLDEN = Path(__file__).parents[1] / "data/demo-sealed-2026-12-01"
EXPAND = CheckResult(
    "capacity.concurrency",
    CheckClass.CAPACITY,
    True,
    Status.FAIL,
    "expand-capacity: queue grew at 4; stable up to concurrency 2; production needs 8",
    {"ceiling": 2, "capacity_ceiling": 2},
    classification=Classification.EXPAND_CAPACITY,
)
LONG = CheckResult(  # asked for 2048; 1024 was the longest input served
    "capacity.long_input",
    CheckClass.CAPACITY,
    True,
    Status.PASS,
    "s",
    {"max_context": 2048, "step_512": "accepted", "step_1024": "accepted", "step_2048": "failed"},
)
SUSTAINED_AT_4 = CheckResult(  # the ramp's ceiling 4 did not hold for the window: a cap of 2
    "capacity.sustained",
    CheckClass.CAPACITY,
    True,
    Status.FAIL,
    "expand-capacity: preempted at 4",
    {"capacity_ceiling": 2, "concurrency": 4},
    classification=Classification.EXPAND_CAPACITY,
)


def _bundle(tmp_path: Path, **capacity: Any) -> BundleReader:
    copy = tmp_path / "bundle"
    shutil.copytree(GOLDEN, copy)
    (copy / "manifest-sha256.txt").unlink()  # evidence to read, not a sealed bundle
    path = copy / "config/effective.yaml"
    config = yaml.safe_load(path.read_text())
    config["capacity"].update(capacity)
    path.write_text(yaml.safe_dump(config))
    return BundleReader(copy)


def _figures(request: dict[str, Any] | None) -> dict[str, tuple[Any, str]]:
    assert request is not None
    return {f["name"]: (f["value"], f["source"]) for f in request["figures"]}


def test_a_stated_need_is_sized_into_replicas_and_gpus(tmp_path: Path) -> None:
    """Ceiling 2 measured, production needs 8 with 25% headroom: ceil(8 x 1.25 / 2) = 5
    replicas of 1 CPU-engine 'GPU' each; today's size serves floor(2 / 1.25) = 1 with that
    headroom. KV figures from the log (43,648 tokens, line 57) and the engine's cache config
    (1 GiB of KV: 24,600 bytes a token); the throughput is the c2 step's."""
    reader = _bundle(tmp_path, required_concurrency=8, headroom=0.25)
    figures = _figures(capacity_request(reader, Outcome.EXPAND_CAPACITY, [EXPAND, LONG]))
    assert figures["ceiling_concurrency"] == (2, "verdict.json#capacity.concurrency")
    assert figures["ceiling_context"][0] == 1024
    assert figures["kv_tokens_available"] == (43648, "environment/startup.log#L57")
    assert figures["kv_bytes_per_token_per_gpu"][0] == round((1 << 30) / 43648)
    assert figures["throughput_at_ceiling"][0] == pytest.approx(0.3048518, rel=1e-6)
    assert figures["throughput_at_ceiling"][1] == "metrics/capacity-steps.jsonl#concurrency=2"
    assert figures["required_concurrency"][0] == 8
    assert figures["replicas_needed"][0] == 5
    assert figures["gpus_per_replica"][0] == 1
    assert figures["gpus_needed"][0] == 5
    assert figures["fallback_concurrency"][0] == 1


def test_what_the_evidence_does_not_say_is_not_given(tmp_path: Path) -> None:
    """No stated need in the config: no replica count is invented; the CPU log prints no
    model-load memory: weights per GPU is not given (never 0)."""
    figures = _figures(capacity_request(_bundle(tmp_path), Outcome.EXPAND_CAPACITY, [EXPAND, LONG]))
    assert figures["required_concurrency"] == (None, "not given")
    assert figures["replicas_needed"][0] is None
    assert figures["gpus_needed"][0] is None
    assert figures["weights_per_gpu"] == (None, "not given")
    assert figures["fallback_concurrency"][0] == 1  # the default 20% headroom


def test_only_an_expand_capacity_verdict_gets_a_request(tmp_path: Path) -> None:
    """No request beside any other outcome, nor without a check that said expand-capacity."""
    reader = _bundle(tmp_path, required_concurrency=8)
    assert capacity_request(reader, Outcome.OBSERVE_WITH_LIMITS, [EXPAND]) is None
    limited = dataclasses.replace(
        EXPAND, measurements={}, classification=Classification.LIMIT_TRAFFIC
    )
    assert capacity_request(reader, Outcome.EXPAND_CAPACITY, [limited]) is None


def test_the_markdown_shows_each_figure_with_its_source(tmp_path: Path) -> None:
    """capacity-request.md: a table of every figure with its unit and source; silent evidence reads 'not given'."""
    reader = _bundle(tmp_path, required_concurrency=8, headroom=0.25)
    request = capacity_request(reader, Outcome.EXPAND_CAPACITY, [EXPAND, LONG])
    assert request is not None
    text = render_capacity_request(request)
    assert "| replicas_needed | 5 | replicas |" in text
    assert "| kv_tokens_available | 43,648 | tokens | environment/startup.log#L57 |" in text
    assert "| weights_per_gpu | not given |" in text
    assert "production needs 8" in text


def test_decide_refuses_an_edited_or_missing_request(tmp_path: Path) -> None:
    """A team buys GPUs from this file: one edited to ask for fewer replicas, or deleted, or
    left beside a verdict that is not expand-capacity, is a difference `golive decide`
    reports."""
    reader = _bundle(tmp_path, required_concurrency=8, headroom=0.25)
    root = reader.root
    checks = [EXPAND, LONG]
    assert request_differences(root, Outcome.EXPAND_CAPACITY, checks) == [
        "capacity-request.json is missing: an expand-capacity verdict carries one"
    ]
    request = capacity_request(reader, Outcome.EXPAND_CAPACITY, checks)
    assert request is not None
    (root / "capacity-request.json").write_text(json.dumps(request))
    assert request_differences(root, Outcome.EXPAND_CAPACITY, checks) == []
    for figure in request["figures"]:
        if figure["name"] == "replicas_needed":
            figure["value"] = 1
    (root / "capacity-request.json").write_text(json.dumps(request))
    assert request_differences(root, Outcome.EXPAND_CAPACITY, checks) == [
        "capacity-request.json is not the capacity request the evidence gives"
    ]
    assert request_differences(root, Outcome.HOLD, checks) == [
        "capacity-request.json is present, but the evidence gives no expand-capacity"
    ]


def test_a_ceiling_that_did_not_hold_sustained_is_not_what_a_replica_holds(
    tmp_path: Path,
) -> None:
    """The ramp held 4, the sustained window at 4 preempted and caps traffic at 2: a replica
    holds fewer than 4, so sizing at 4 would buy too few. The request sizes from the cap
    (16 / 2 = 8 replicas), and its source says the cap was not itself sustained and how to
    confirm it. (Sized at the ramp's 4, a need of 4 asked for the one replica there is.)"""
    ramp = dataclasses.replace(
        EXPAND,
        status=Status.PASS,
        measurements={"ceiling": 4},
        classification=Classification.STABLE,
    )
    sustained = SUSTAINED_AT_4
    reader = _bundle(tmp_path, required_concurrency=16, headroom=0.0)
    figures = _figures(capacity_request(reader, Outcome.EXPAND_CAPACITY, [ramp, sustained]))
    assert figures["ceiling_concurrency"][0] == 2
    assert "stable step 4 did not hold" in figures["ceiling_concurrency"][1]
    assert "--concurrency 2" in figures["ceiling_concurrency"][1]
    assert figures["replicas_needed"][0] == 8
    assert figures["throughput_at_ceiling"][0] == pytest.approx(0.3048518, rel=1e-6)
    reader = _bundle(tmp_path / "need4", required_concurrency=4, headroom=0.0)
    figures = _figures(capacity_request(reader, Outcome.EXPAND_CAPACITY, [ramp, sustained]))
    assert figures["replicas_needed"][0] == 2


def test_a_context_need_says_how_far_the_kv_cache_must_grow(tmp_path: Path) -> None:
    """A need of 87,296 tokens against the 43,648 KV tokens the log shows: one replica's KV
    cache must double to hold one such request (with its source); without the key the
    figure is absent (older bundles re-derive)."""
    reader = _bundle(tmp_path, required_context=87296)
    figures = _figures(capacity_request(reader, Outcome.EXPAND_CAPACITY, [EXPAND, LONG]))
    growth, source = figures["kv_growth_for_required_context"]
    assert growth == 2.0
    assert source.startswith("required_context / kv_tokens_available")
    plain = _figures(
        capacity_request(_bundle(tmp_path / "p"), Outcome.EXPAND_CAPACITY, [EXPAND, LONG])
    )
    assert "kv_growth_for_required_context" not in plain


@pytest.mark.parametrize(
    ("need", "headroom", "replicas", "fallback"), [(100, 0.1, 55, 1), (8, 0.25, 5, 1)]
)
def test_float_rounding_buys_no_extra_replica(
    tmp_path: Path, need: int, headroom: float, replicas: int, fallback: int
) -> None:
    """100 x 1.1 / 2 is 55 replicas (floats say 55.000000000000007, which rounds up to 56)."""
    reader = _bundle(tmp_path, required_concurrency=need, headroom=headroom)
    figures = _figures(capacity_request(reader, Outcome.EXPAND_CAPACITY, [EXPAND, LONG]))
    assert figures["replicas_needed"][0] == replicas
    assert figures["fallback_concurrency"][0] == fallback


def test_a_combined_bundle_sizes_from_the_part_that_expanded(tmp_path: Path) -> None:
    """`decide --combine`: the request reads the config and evidence of the part whose check
    said expand-capacity (need 8 there), not the combined bundle's own config (need 3), and
    cites the part's files."""
    part = _bundle(tmp_path, required_concurrency=8, headroom=0.25).root
    root = tmp_path / "combined"
    (root / "parts").mkdir(parents=True)
    part.rename(root / "parts/capacity")
    (root / "config").mkdir()
    (root / "config/effective.yaml").write_text(
        yaml.safe_dump({"capacity": {"required_concurrency": 3, "headroom": 0.0}})
    )
    expand = dataclasses.replace(EXPAND, evidence=("parts/capacity/metrics/capacity-steps.jsonl",))
    request = capacity_request(BundleReader(root), Outcome.EXPAND_CAPACITY, [expand, LONG])
    figures = _figures(request)
    assert figures["required_concurrency"] == (
        8,
        "parts/capacity/config/effective.yaml#capacity.required_concurrency",
    )
    assert figures["replicas_needed"][0] == 5
    assert figures["kv_tokens_available"][1] == "parts/capacity/environment/startup.log#L57"


def test_the_lowest_limit_of_the_expanding_checks_sizes_the_request(tmp_path: Path) -> None:
    """The ramp expanded at its ceiling 4, and the sustained window at 4 expanded too with a
    limit of 2: a replica holds fewer than 4, so the request sizes from 2 (16 / 2 = 8
    replicas), whichever check comes first."""
    ramp = dataclasses.replace(
        EXPAND,
        measurements={"ceiling": 4, "capacity_ceiling": 4},
    )
    sustained = SUSTAINED_AT_4
    reader = _bundle(tmp_path, required_concurrency=16, headroom=0.0)
    for order in ([ramp, sustained], [sustained, ramp]):
        request = capacity_request(reader, Outcome.EXPAND_CAPACITY, order)
        assert request is not None
        assert request["check"] == "capacity.sustained"
        figures = _figures(request)
        assert figures["ceiling_concurrency"][0] == 2
        assert figures["replicas_needed"][0] == 8
