"""A Kubernetes API for the tests: kmock, an in-process emulator (no real API server can run
here: no validation, no controllers, no server-side label selection), with engine pods and
GPU nodes as the tests need them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock

DATA = Path(__file__).parent.parent / "data"
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")


def engine_pod(
    name: str,
    node: str,
    digest: str,
    labels: dict[str, str],
    restarts: int = 0,
    last_reason: str | None = None,
) -> Any:
    image = "registry.example/vllm:0.32"
    last = {"terminated": {"reason": last_reason, "exitCode": 137}} if last_reason else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "vllm", "image": image}]},
        "status": {
            "containerStatuses": [
                {
                    "name": "vllm",
                    "image": image,
                    "imageID": f"docker-pullable://registry.example/vllm@{digest}",
                    "restartCount": restarts,
                    "lastState": last,
                    "ready": True,
                }
            ]
        },
    }


def _node(name: str, driver: str) -> Any:
    major, minor, rev = driver.split(".")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/cuda.driver.major": major,
                "nvidia.com/cuda.driver.minor": minor,
                "nvidia.com/cuda.driver.rev": rev,
                "nvidia.com/gpu.product": "NVIDIA-H200",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/gpu.memory": "143771",
            },
        },
    }


class Cluster:
    def __init__(self, emulator: Any, kubeconfig: Path) -> None:
        self.emulator = emulator
        self.kubeconfig = kubeconfig

    def add_pod(self, name: str, node: str, digest: str = DIGEST, **kw: Any) -> None:
        labels = kw.pop("labels", {"app": "vllm", "role": "engine"})
        self.emulator.objects[PODS, "llm", name] = engine_pod(name, node, digest, labels, **kw)
        log = (DATA / "vllm-cpu-0.32/startup.log").read_bytes()
        (
            self.emulator[f"get /api/v1/namespaces/llm/pods/{name}/log"]
            << kmock.headers({"Content-Type": "text/plain"})
            << log
        )

    def add_node(self, name: str, driver: str = "580.95.05") -> None:
        self.emulator.objects[NODES, None, name] = _node(name, driver)


@contextlib.asynccontextmanager
async def emulated_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """An emulated API server and a kubeconfig that points at it."""
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "emu", "cluster": {"server": str(emulator.url)}}],
                    "users": [{"name": "golive", "user": {"token": "test-token"}}],
                    "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "golive"}}],
                    "current-context": "emu",
                }
            )
        )
        yield Cluster(emulator, kubeconfig)
