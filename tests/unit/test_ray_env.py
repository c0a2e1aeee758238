"""Judging a Ray cluster's node reports (pure), and golive without Ray installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import RAY_NODES
from golive.bundle.store import BundleReader
from golive.cli.main import main
from golive.evidence.facts import HostInfo
from golive.evidence.ray_env import (
    ClusterReport,
    RaySource,
    _nodes,
    judge_ray_nodes,
    node_results,
    saved_cluster,
)

HOST = {"kind": "host", "node": "x", "source": "nvidia-smi", "driver_version": "580.1"}


def _cluster(entries: list[dict[str, Any]], alive: int) -> ClusterReport:
    raw = {"alive_nodes": alive, "nodes": entries}
    return ClusterReport("http://h:8265", "job", alive, _nodes(raw), raw)


@pytest.mark.parametrize(
    ("entries", "alive", "expect", "statuses"),
    [
        (
            [{"node_id": "a" * 56, "hostname": "gpu-1", "host": HOST}],
            1,
            1,
            {"environment.node_count": "pass"},
        ),
        (
            [{"node_id": "a" * 56, "hostname": "gpu-1", "host": HOST}],
            1,
            2,
            {"environment.node_count": "fail"},
        ),
        (
            [
                {"node_id": "a" * 56, "hostname": "gpu-1", "host": HOST},
                {"node_id": "b" * 56, "hostname": "gpu-2", "error": "NodeDiedError: gone"},
            ],
            2,
            None,
            {"environment.node_count": "pass", "environment.node.gpu-2": "no_data"},
        ),
        (
            [{"node_id": "c" * 56, "hostname": "gpu-3", "host": {"kind": "host", "gpus": 7}}],
            1,
            None,
            {"environment.node_count": "pass", "environment.node.gpu-3": "no_data"},
        ),
    ],
)
def test_node_results(
    entries: list[dict[str, Any]], alive: int, expect: int | None, statuses: dict[str, str]
) -> None:
    """Each Ray node's report, a missing one or too few nodes give their check status."""
    results = node_results(RaySource("http://h:8265", expect), _cluster(entries, alive), None)
    assert {r.id: r.status.value for r in results} == statuses


def _saved(tmp_path: Path, record: object) -> BundleReader:
    path = tmp_path / RAY_NODES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return BundleReader(tmp_path)


def test_decide_judges_the_saved_record_as_the_run_did(tmp_path: Path) -> None:
    """The node checks are judged again from environment/ray-nodes.json (the job's answer and
    what was asked): the same results as the run's, so a verdict edited to drop the node
    that did not report, or to pass a count below the one declared, differs from them."""
    entries: list[dict[str, Any]] = [
        {"node_id": "a" * 56, "hostname": "gpu-1", "host": HOST},
        {"node_id": "b" * 56, "hostname": "gpu-2", "error": "NodeDiedError: gone"},
    ]
    source = RaySource("http://h:8265", 3)
    live = node_results(source, _cluster(entries, 2), None)
    reader = _saved(tmp_path, saved_cluster(source, _cluster(entries, 2), None))
    again = judge_ray_nodes(reader)
    assert again == live
    assert {r.id: r.status.value for r in again} == {
        "environment.node_count": "fail",
        "environment.node.gpu-2": "no_data",
    }


def test_a_failed_collection_is_judged_again_as_no_data(tmp_path: Path) -> None:
    """A cluster that did not answer leaves a record of why: decide says no_data with it."""
    source = RaySource("http://h:8265", 3)
    reader = _saved(tmp_path, saved_cluster(source, None, "the Jobs API does not answer"))
    [result] = judge_ray_nodes(reader)
    assert result.status.value == "no_data"
    assert "does not answer" in result.summary


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ({"alive_nodes": 1, "nodes": []}, "has no request"),
        ({"source": {"expect_nodes": "3"}, "alive_nodes": 1, "nodes": []}, "whole number"),
        ({"source": {"expect_nodes": 1}, "alive_nodes": "x", "nodes": []}, "does not read"),
        ({"source": {"expect_nodes": 1}, "alive_nodes": 2, "nodes": []}, "but lists 0"),
        ({"source": {"expect_nodes": 1}, "alive_nodes": 1, "nodes": [7]}, "does not read"),
        ({"source": {"expect_nodes": 1}, "problem": None}, "lists no nodes"),
    ],
)
def test_a_damaged_record_is_no_data_naming_the_file(
    tmp_path: Path, record: dict[str, Any], said: str
) -> None:
    """Missing request, wrong types, no node list: no_data naming the file, never a pass."""
    results = judge_ray_nodes(_saved(tmp_path, record))
    assert results[0].id == "environment.node_count"
    assert results[0].status.value == "no_data"
    assert said in results[0].summary
    assert RAY_NODES in results[0].summary or RAY_NODES in results[0].evidence


def test_a_record_whose_node_list_was_cut_is_not_believed(tmp_path: Path) -> None:
    """The collector answers once for every alive node: a record listing fewer (the node that
    did not report removed, or the alive count raised to the declared one) is no_data."""
    entries: list[dict[str, Any]] = [
        {"node_id": "a" * 56, "hostname": "gpu-1", "host": HOST},
        {"node_id": "b" * 56, "hostname": "gpu-2", "error": "NodeDiedError: gone"},
    ]
    record = saved_cluster(RaySource("http://h:8265", 3), _cluster(entries, 2), None)
    cut = {**record, "nodes": entries[:1]}
    [result] = judge_ray_nodes(_saved(tmp_path, cut))
    assert result.status.value == "no_data"
    assert "counts 2 alive node(s) but lists 1" in result.summary
    raised = {**record, "alive_nodes": 3}
    [result] = judge_ray_nodes(_saved(tmp_path / "r", raised))
    assert result.status.value == "no_data"


def test_twin_hostnames_are_told_apart_by_node_id() -> None:
    """Two nodes with one hostname are told apart by their Ray node id."""
    cluster = _cluster(
        [
            {"node_id": "1" * 56, "hostname": "vm", "host": HOST},
            {"node_id": "2" * 56, "hostname": "vm", "host": HOST},
        ],
        2,
    )
    assert [n.name for n in cluster.nodes] == ["vm-11111111", "vm-22222222"]
    assert [n.host.node for n in cluster.nodes if n.host] == ["vm-11111111", "vm-22222222"]


def test_each_node_keeps_the_address_ray_gave_it() -> None:
    """A node's host facts carry the address Ray names it by (`NodeManagerAddress`, what its
    workers log as `ip=`); a report sealed before the address was kept reads as it did."""
    entries: list[dict[str, Any]] = [
        {"node_id": "a" * 56, "hostname": "gpu-1", "address": "10.0.0.2", "host": HOST},
        {"node_id": "b" * 56, "hostname": "gpu-2", "host": HOST},
    ]
    hosts = [n.host for n in _cluster(entries, 2).nodes]
    assert [h.address for h in hosts if h] == ["10.0.0.2", None]
    old = HostInfo.model_validate({**HOST, "node": "gpu-2"})
    assert hosts[1] == old
    assert HostInfo.model_validate_json(old.model_dump_json()) == old  # a host file round-trips


def test_an_address_that_is_not_text_is_a_node_that_did_not_report() -> None:
    """An edited report whose address is not a string does not validate: that node is
    no_data, never a host with a made-up address."""
    entries: list[dict[str, Any]] = [
        {"node_id": "a" * 56, "hostname": "gpu-1", "address": 7, "host": HOST}
    ]
    [node] = _cluster(entries, 1).nodes
    assert node.host is None
    assert node.error is not None
    assert "does not validate" in node.error


def test_the_collector_names_each_node_by_its_address() -> None:
    """The Ray job's per-node entry, answered or failed, names the node's address as
    `ray.nodes()` gives it (None where Ray gives none)."""
    pytest.importorskip("ray", reason="needs golive[ray]")
    from golive.evidence.scripts import ray_nodes

    node = {
        "NodeID": "a" * 56,
        "Alive": True,
        "NodeManagerHostname": "gpu-1",
        "NodeManagerAddress": "10.0.0.2",
    }
    assert ray_nodes.node_identity(node) == {
        "node_id": "a" * 56,
        "hostname": "gpu-1",
        "address": "10.0.0.2",
    }
    failed = ray_nodes._failed(node, "no answer within 120 s")
    assert failed["address"] == "10.0.0.2"
    assert failed["error"] == "no answer within 120 s"
    assert ray_nodes.node_identity({"NodeID": "b" * 56})["address"] is None
    saved = {"alive_nodes": 1, "nodes": [{**ray_nodes.node_identity(node), "host": HOST}]}
    [reported] = _nodes(saved)
    assert reported.host is not None
    assert reported.host.address == "10.0.0.2"


def test_no_cluster_evidence_is_no_data() -> None:
    """A cluster that does not answer is no_data, saying why."""
    [result] = node_results(RaySource("http://h:8265", 3), None, "the Jobs API does not answer")
    assert result.status.value == "no_data"
    assert "does not answer" in result.summary


def test_env_without_ray_installed_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without Ray installed, --ray is a usage error naming the extra to install."""
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    assert main(["env", "--ray", "http://127.0.0.1:1"]) == 2
    assert "pip install 'golive[ray]'" in capsys.readouterr().err


def test_expect_nodes_needs_ray(capsys: pytest.CaptureFixture[str]) -> None:
    """--expect-nodes without --ray is a usage error."""
    assert main(["env", "--expect-nodes", "2"]) == 2
    assert "give --ray ADDRESS" in capsys.readouterr().err
