"""NCCL logs for the transport tests, built from the real capture of two H200s on one host
(`tests/data/gpu-h200-x2/nccl_init.log`: NCCL 2.28.9, NCCL_DEBUG=INFO, no IB device, so
`Using network Socket`, and the two ranks on P2P/CUMEM).

`two_nodes` moves rank 1 to a second host, as NCCL prints a two-node run: its lines come
from host vm2 at 192.0.2.3, the communicator spans two nodes with one rank on each, and the
channels between the ranks go over the network (`via NET/Socket/0`) instead of P2P."""

from __future__ import annotations

import re
from pathlib import Path

DATA = Path(__file__).parents[1] / "data"
ONE_HOST = DATA / "gpu-h200-x2/nccl_init.log"


def one_host() -> str:
    """The capture as it is."""
    return ONE_HOST.read_text()


def nccl_only(text: str) -> list[str]:
    """Its NCCL lines alone (torchrun's and the test script's lines left out)."""
    return [line for line in text.splitlines() if " NCCL " in line]


def two_nodes(text: str | None = None, network: str = "Socket", mnnvl: int = 0) -> str:
    """The capture with rank 1 on a second node; `network` the one NCCL chose (Socket as
    captured, or IB), `mnnvl` what the communicator line says of multi-node NVLink."""
    lines = []
    for captured in (one_host() if text is None else text).splitlines():
        line = captured
        if line.startswith("vm:619:"):  # rank 1's process
            line = "vm2" + line.removeprefix("vm").replace("192.0.2.2", "192.0.2.3")
        lines.append(
            line.replace("nNodes 1 localRanks 2", "nNodes 2 localRanks 1")
            .replace("MNNVL 0", f"MNNVL {mnnvl}")
            .replace("via P2P/CUMEM", f"[send] via NET/{network}/0")
            .replace("Using network Socket", f"Using network {network}")
        )
    return "\n".join(lines) + "\n"


def with_nccl_before_ready(log: str, nccl: str) -> str:
    """A vLLM startup log with NCCL's lines where a worker prints them: before the server
    says it is ready."""
    lines = log.splitlines()
    ready = next(i for i, x in enumerate(lines) if "Starting vLLM server on" in x)
    return "\n".join([*lines[:ready], *nccl_only(nccl), *lines[ready:]]) + "\n"


def spanning_layout(log: str) -> str:
    """A vLLM startup log of TP=2 (the H200 capture) started with tensor parallel 4 instead,
    its workers in a world of 4: more ranks than a node of two GPUs has, so the engine spans
    two such nodes whatever NCCL printed."""
    wider = log.replace("'tensor_parallel_size': 2", "'tensor_parallel_size': 4")
    wider = wider.replace("tensor_parallel_size=2", "tensor_parallel_size=4")
    return re.sub(r"\bworld_size=2\b", "world_size=4", wider)


def ray_deduplicated(text: str) -> str:
    """The two-node log as Ray prints it from a terminal: each worker's lines behind its
    coloured prefix, and vm2's lines folded by Ray's log deduplication (`[repeated 3x across
    cluster]` in colour)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("vm2:"):
            lines.append(
                "\x1b[36m(RayWorkerWrapper pid=619, ip=192.0.2.3)\x1b[0m "
                + line
                + "\x1b[32m [repeated 3x across cluster]\x1b[0m"
            )
        elif line.startswith("vm:"):
            lines.append("\x1b[36m(RayWorkerWrapper pid=618, ip=192.0.2.2)\x1b[0m " + line)
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"
