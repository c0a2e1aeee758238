"""The Ray nodes' GPU memory samplers (issue 30 §4): what a node reads (NVML, else the
driver's `nvidia-smi --query-gpu`), and how golive turns the job's lines into one curve per
node, naming every node that gave none."""

from __future__ import annotations

import json

import pytest

from golive.errors import EvidenceError
from golive.evidence.node_gpu import parse_query
from golive.evidence.ray_gpu_curve import MARKER, node_curves, sampler_lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0, 615, 143771\n", {"gpu0_used_mib": 615.0, "gpu0_total_mib": 143771.0}),
        (
            "0, 127940, 143771\n1, 700, 143771\n",
            {
                "gpu0_used_mib": 127940.0,
                "gpu0_total_mib": 143771.0,
                "gpu1_used_mib": 700.0,
                "gpu1_total_mib": 143771.0,
            },
        ),
        # a field the driver cannot read is unknown, never 0
        ("0, [N/A], 143771\n", {"gpu0_used_mib": None, "gpu0_total_mib": 143771.0}),
    ],
)
def test_the_drivers_memory_query_is_read(text: str, expected: dict[str, float | None]) -> None:
    """nvidia-smi's CSV query as the curve's columns, by GPU index."""
    assert parse_query(text) == expected


@pytest.mark.parametrize("text", ["", "No devices were found\n", "0, 615\n"])
def test_an_answer_that_is_not_the_query_is_refused(text: str) -> None:
    """No GPU listed, or a line of another shape: an error naming it, never an empty row."""
    with pytest.raises(EvidenceError, match="nvidia-smi --query-gpu"):
        parse_query(text)


def _line(node: str, host: str, rows: list[dict[str, float]], error: str | None = None) -> str:
    return f"{MARKER} " + json.dumps(
        {"node_id": node, "hostname": host, "rows": rows, "error": error}
    )


def test_each_node_is_one_curve_and_a_silent_node_is_named() -> None:
    """Two drains of two twin-named nodes (rows in time order, across drains) and a third
    node whose sampler never read: two curves in --gpu-curve columns named like golive names
    Ray nodes, and the third named with its sampler's error; Ray's own log lines ignored."""
    a, b, c = "a" * 56, "b" * 56, "c" * 56
    logs = "\n".join(
        [
            "2026-12-05 INFO job started",
            f"{MARKER} " + json.dumps({"alive_nodes": 3, "not_ready": []}),
            _line(a, "gpu", [{"wall_time": 2.0, "gpu0_used_mib": 620.0, "gpu0_total_mib": 1e3}]),
            _line(b, "gpu", [{"wall_time": 2.1, "gpu0_used_mib": 700.0, "gpu0_total_mib": 1e3}]),
            _line(c, "cpu-box", [], "EvidenceError: no GPU memory here: nvidia-smi not found"),
            _line(a, "gpu", [{"wall_time": 4.0, "gpu0_used_mib": 900.0, "gpu0_total_mib": 1e3}]),
            f"{MARKER} not json",
        ]
    )
    found = node_curves(sampler_lines(logs))
    assert [name for name, _ in found.curves] == ["ray-gpu-aaaaaaaa", "ray-gpu-bbbbbbbb"]
    assert found.curves[0][1].splitlines() == [
        "wall_time,gpu0_total_mib,gpu0_used_mib",
        "2.0,1000.0,620.0",
        "4.0,1000.0,900.0",
    ]
    assert found.problems == [
        "node cpu-box: no GPU memory sampled (EvidenceError: no GPU memory here: nvidia-smi "
        "not found)"
    ]


def test_a_cluster_that_does_not_answer_is_a_problem_not_a_crash() -> None:
    """A Jobs API address nothing listens on: the sampler never starts, says why, and stopping
    it returns no line (capacity.gpu_memory is no_data; the phases are not its cost)."""
    pytest.importorskip("ray.job_submission", reason="needs golive[ray]")
    from golive.evidence.ray_env import RaySource
    from golive.evidence.ray_gpu_curve import RayGpuCurves

    sampler = RayGpuCurves(RaySource("http://127.0.0.1:9"))
    sampler.start()
    assert sampler.problem is not None
    assert "the GPU memory sampler job could not start" in sampler.problem
    assert "http://127.0.0.1:9" in sampler.problem
    assert sampler.stop() == []
