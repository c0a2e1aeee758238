"""The Kubernetes reader's pure parts: selector matching, GPU labels as host facts."""

from __future__ import annotations

import sys

import pytest

from golive.cli.main import main
from golive.evidence.k8s_env import K8sReport, K8sSource, _matches, node_hosts


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ("app=vllm", {"app": "vllm"}, True),
        ("app==vllm,role=engine", {"app": "vllm", "role": "router"}, False),
        ("app=vllm,role!=router", {"app": "vllm", "role": "engine"}, True),
        ("app=vllm,role!=router", {"app": "vllm", "role": "router"}, False),
        ("gpu", {"gpu": "yes"}, True),
        ("gpu", {}, False),
        ("!canary", {"canary": "1"}, False),
        ("tier in (a,b)", {}, True),  # set-based: the API server's job
    ],
)
def test_selector(selector: str, labels: dict[str, str], selected: bool) -> None:
    """Label selectors match pods as Kubernetes matches them."""
    assert _matches(labels, selector) is selected


def test_nodes_without_gpu_labels_give_no_host_facts() -> None:
    """Only nodes with GPU labels become hosts, with driver and GPU count from the labels."""
    report = K8sReport(
        K8sSource("llm", "app=vllm"),
        (),
        {
            "cpu-0": {"kubernetes.io/os": "linux"},
            "gpu-0": {"nvidia.com/cuda.driver.major": "580", "nvidia.com/gpu.count": "2"},
        },
    )
    [host] = node_hosts(report)
    assert host.node == "gpu-0"
    assert host.driver_version == "580"
    assert len(host.gpus) == 2


def test_env_without_the_kubernetes_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the kubernetes client, --k8s-namespace is a usage error naming the extra to install."""
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    assert main(["env", "--k8s-namespace", "llm", "--selector", "app=vllm"]) == 2
    assert "pip install 'golive[k8s]'" in capsys.readouterr().err
