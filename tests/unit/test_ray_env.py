"""Judging a Ray cluster's node reports (pure), and golive without Ray installed."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from golive.cli.main import main
from golive.evidence.ray_env import ClusterReport, RaySource, _nodes, node_results

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
