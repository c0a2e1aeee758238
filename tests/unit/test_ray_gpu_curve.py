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


def _lines(*rows: dict[str, object]) -> list[dict[str, object]]:
    return [dict(r) for r in rows]


ROW = {"wall_time": 1.0, "gpu0_used_mib": 615.0, "gpu0_total_mib": 143771.0}


@pytest.mark.parametrize(
    ("lines", "curves", "problem"),
    [
        # a node whose last read failed after earlier rows: its curve stops early, said
        (
            _lines(
                {"node_id": "a" * 56, "hostname": "g", "rows": [ROW], "error": None},
                {"node_id": "a" * 56, "hostname": "g", "rows": [], "error": "NVMLError: lost"},
            ),
            1,
            "node g: its last GPU memory read failed (NVMLError: lost)",
        ),
        # the cluster has GPU nodes that never printed a line
        (
            _lines(
                {"alive_nodes": 3, "gpu_nodes": 2, "without_gpu": ["head"], "not_ready": []},
                {"node_id": "a" * 56, "hostname": "g", "rows": [ROW], "error": None},
            ),
            1,
            "1 of the cluster's 2 GPU node(s) never reported",
        ),
        # no node offers a GPU to Ray
        (_lines({"alive_nodes": 1, "gpu_nodes": 0}), 0, "no node of the Ray cluster offers"),
        # rows of another shape, and a hostname that is not text: left out, named, no crash
        (
            _lines(
                {
                    "node_id": "a" * 56,
                    "hostname": 7,
                    "rows": [ROW, {"wall_time": "n/a"}, {"wall_time": [1]}, "x"],
                    "error": None,
                }
            ),
            1,
            "3 sampled row(s) without a time were left out",
        ),
    ],
)
def test_what_the_curves_do_not_show_is_said(
    lines: list[dict[str, object]], curves: int, problem: str
) -> None:
    """A curve that ends early, GPU nodes that never reported, a cluster without GPUs and
    rows that cannot be placed in time are each a problem (capacity.gpu_memory no_data),
    never a pass over a partial curve."""
    found = node_curves(lines)
    assert len(found.curves) == curves
    assert any(problem in p for p in found.problems), found.problems


def test_sample_gpus_needs_the_chain_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    """`golive run --sample-gpus` without --chain-ray: refused before anything is sent."""
    from golive.cli.main import main

    code = main(["run", "--target", "http://127.0.0.1:9", "--sample-gpus", "--log", "/dev/null"])
    assert code == 2
    assert "--sample-gpus samples the nodes of the --chain-ray cluster" in capsys.readouterr().err
