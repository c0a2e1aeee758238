"""GPU memory of this node, read once: NVML where it works, else the driver's own
`nvidia-smi --query-gpu` (a node whose Python lacks pynvml still has the driver's tool). What
the samplers on each node of a vLLM Ray cluster report (`scripts/ray_gpu_curve.py`), in the
columns of `golive env collect --gpu-curve` (`gpu<i>_used_mib`, `gpu<i>_total_mib`)."""

from __future__ import annotations

from typing import Any

from golive.errors import EvidenceError
from golive.evidence.collect import run_tool

MIB = 1024 * 1024
QUERY = [
    "nvidia-smi",
    "--query-gpu=index,memory.used,memory.total",
    "--format=csv,noheader,nounits",
]
_handles: list[Any] = []  # NVML's device handles, once it is up in this process


def read_gpu_memory() -> dict[str, float | None]:
    """Used and total MiB of every GPU here; EvidenceError where neither NVML nor nvidia-smi
    can say."""
    nvml = _from_nvml()
    if nvml is not None:
        return nvml
    text, problem = run_tool(QUERY)
    if text is None:
        raise EvidenceError(f"no GPU memory here: NVML is not usable and {problem}")
    return parse_query(text)


def parse_query(text: str) -> dict[str, float | None]:
    """`nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits`
    as columns; a field nvidia-smi cannot read (`[N/A]`) is None."""
    values: dict[str, float | None] = {}
    for line in text.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            raise EvidenceError(f"nvidia-smi --query-gpu: unexpected line {line[:80]!r}")
        index = fields[0]
        values[f"gpu{index}_used_mib"] = _number(fields[1])
        values[f"gpu{index}_total_mib"] = _number(fields[2])
    if not values:
        raise EvidenceError("nvidia-smi --query-gpu listed no GPU")
    return values


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _from_nvml() -> dict[str, float | None] | None:
    try:
        import pynvml

        if not _handles:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            # every handle or none: a lookup that fails is tried again at the next read
            _handles.extend([pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)])
    except Exception:
        return None
    values: dict[str, float | None] = {}
    for index, handle in enumerate(_handles):
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        except Exception:
            values[f"gpu{index}_used_mib"] = values[f"gpu{index}_total_mib"] = None
            continue
        values[f"gpu{index}_used_mib"] = info.used / MIB
        values[f"gpu{index}_total_mib"] = float(info.total // MIB)
    return values or None
