"""A real Ray cluster on 127.0.0.1 for the `--ray` tests: each node gets its own `nvidia-smi`
on PATH printing a real H200 capture, since this machine has no GPU."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

# Before Ray is imported: every Ray process, and this test's driver, stay on 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="needs golive[ray]")
from golive.traffic.load_split import split  # noqa: E402
from golive.traffic.ray_load import RayLoad  # noqa: E402 - imports Ray: after the lines above

__all__ = ["XML", "LoopbackCluster", "RayLoad", "split", "three_node_cluster"]

DATA = Path(__file__).parents[1] / "data"
XML = (DATA / "gpu-h200-x1/nvidia-smi-q.xml").read_text()


CURVE = DATA / "gpu-h200-x1/gpu-curve.csv"  # a real H200's memory while vLLM loaded
QUERY = "--query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits"


def _fake_smi(directory: Path, xml: str, delay_s: float = 0.0) -> Path:
    """A directory holding an `nvidia-smi` that prints `xml` (after `delay_s`), and answers
    the memory query with the real H200 curve's rows in turn, one per call."""
    directory.mkdir(parents=True)
    (directory / "smi.xml").write_text(xml)
    used = [line.split(",")[1] for line in CURVE.read_text().splitlines()[1:]]
    (directory / "used.txt").write_text("\n".join(used) + "\n")
    script = directory / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"touch {directory}/started\n"
        f"sleep {delay_s}\n"
        f'case "$*" in "-q -x") cat {directory}/smi.xml ;; "topo -m") echo "GPU0 X" ;; '
        f'"{QUERY}") n=$(cat {directory}/n 2>/dev/null || echo 0); n=$((n % {len(used)} + 1)); '
        f'echo $n > {directory}/n; echo "0, $(sed -n "${{n}}p" {directory}/used.txt), 143771" ;; '
        "*) exit 1 ;; esac\n"
    )
    script.chmod(0o755)
    return directory


class LoopbackCluster:
    """A head and worker nodes of a real Ray cluster, on 127.0.0.1 only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._path = os.environ["PATH"]
        port = _free_port()
        self.address = f"http://127.0.0.1:{port}"
        self.cluster = self._with_smi(
            "head",
            XML,
            0.0,
            lambda: ray_cluster_utils.Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "num_gpus": 1,  # Ray's GPU resource: the node is sampled (nvidia-smi below)
                    "include_dashboard": True,
                    "dashboard_host": "127.0.0.1",
                    "dashboard_port": port,
                    "node_ip_address": "127.0.0.1",
                },
            ),
        )
        self.nodes: dict[str, Any] = {"head": self.cluster.head_node}

    def _with_smi(self, name: str, xml: str, delay_s: float, start: Any) -> Any:
        """Start a node whose processes find this node's own nvidia-smi first on PATH."""
        smi = _fake_smi(self.root / name, xml, delay_s)
        os.environ["PATH"] = f"{Path(sys.executable).parent}:{smi}:{self._path}"
        try:
            return start()
        finally:
            os.environ["PATH"] = self._path

    def add(self, name: str, xml: str = XML, delay_s: float = 0.0) -> Any:
        node = self._with_smi(
            name,
            xml,
            delay_s,
            lambda: self.cluster.add_node(
                num_cpus=1,
                num_gpus=1,
                object_store_memory=80 << 20,
                node_ip_address="127.0.0.1",
            ),
        )
        self.nodes[name] = node
        return node

    def node_name(self, name: str) -> str:
        """The name golive gives a node: its hostname, with the Ray node id for twins."""
        return f"{socket.gethostname()}-{self.nodes[name].node_id[:8]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def three_node_cluster() -> Generator[LoopbackCluster]:
    """A head and two workers (worker-2 with an R575 driver), shut down afterwards."""
    root = Path(tempfile.mkdtemp(prefix="gr", dir="/tmp"))  # Ray's socket paths must be short
    saved = {"RAY_TMPDIR": os.environ.get("RAY_TMPDIR")}
    os.environ["RAY_TMPDIR"] = str(root / "ray")
    made = LoopbackCluster(root)
    try:
        made.add("worker-1")
        made.add("worker-2", XML.replace("580.159.04", "575.57.08"))
        yield made
    finally:
        made.cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)
