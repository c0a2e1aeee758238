"""The evidence files `golive env collect` writes and `golive env` reads (pydantic: they come
from other machines and may be edited, so they are validated like any untrusted input)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from golive.errors import EvidenceError

SCHEMA_VERSION = 1


class Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuInfo(Facts):
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    persistence_mode: str | None = None
    mig_mode: str | None = None
    compute_capability: str | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    fabric_cluster_uuid: str | None = None  # the multi-node NVLink domain (all zeros: none)
    fabric_clique_id: str | None = None


class HostInfo(Facts):
    """One node: its driver, CUDA driver API level and GPUs."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "host"
    node: str
    # the node's IP as its cluster names it (Ray's NodeManagerAddress): what the `ip=` of a
    # Ray worker's startup log line is matched against; None where the evidence names none
    address: str | None = None
    source: str  # nvml | nvidia-smi-xml | nvidia-smi
    collected_at: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the highest CUDA the driver supports, e.g. "13.0"
    proc_driver_version: str | None = None  # /proc/driver/nvidia/version: the kernel module
    gpus: tuple[GpuInfo, ...] = ()
    fabric_manager: str | None = None  # systemd state of nvidia-fabricmanager, when present
    imex: str | None = None  # systemd state of nvidia-imex (multi-node NVLink), when present
    imex_domain: str | None = None  # `nvidia-imex-ctl -N`: the IMEX domain's nodes and state
    # the NVIDIA container toolkit that exposes the GPUs to containers (`nvidia-ctk
    # --version`, else `nvidia-container-cli --version`), where installed
    container_toolkit: str | None = None
    topology: str | None = None
    errors: tuple[str, ...] = ()


class ContainerGpu(Facts):
    index: int
    name: str
    uuid: str | None = None
    memory_total_mib: int | None = None


class ContainerInfo(Facts):
    """The serving container: image, Python packages, CUDA libraries, variables, command."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "container"
    collected_at: str | None = None
    hostname: str | None = None
    image: str | None = None
    image_digests: tuple[str, ...] = ()
    python: str | None = None
    vllm_version: str | None = None
    vllm_distribution: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    cudart_version: int | None = None  # cudaRuntimeGetVersion, e.g. 13000
    cuda_driver_api_version: int | None = None  # cuDriverGetVersion via the libcuda loaded
    cuda_compat_libs: tuple[str, ...] = ()
    nccl_version: str | None = None
    packages: dict[str, str] = {}
    environment: dict[str, str] = {}  # the runtime variables (VLLM_*, NCCL_*, CUDA_*, ...)
    environment_source: str | None = None  # "serving process <pid>", or "probe" (its own)
    cuda_visible_devices: str | None = None
    # as torch sees them inside the container; None: not recorded (an older probe, or torch
    # could not say), never "none"
    gpus: tuple[ContainerGpu, ...] | None = None
    container_runtime: str | None = None  # kubernetes | docker | podman | containerd
    serve_command: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


M = TypeVar("M", bound=Facts)


def read_facts(path: Path, model: type[M]) -> M:
    """Read and validate an evidence JSON file; errors name the file, field and fix."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot be read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise EvidenceError(
            f"{path}: not JSON ({exc}); was it written by `golive env collect`?"
        ) from exc
    expected = model.model_fields["kind"].default
    if isinstance(data, dict) and data.get("kind") not in (None, expected):
        raise EvidenceError(
            f"{path}: holds {data.get('kind')!r} evidence, but was given where {expected!r} "
            f"evidence belongs (use --{expected}-info)"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise EvidenceError(
            f"{path}: not valid {expected} evidence ({problems}); re-collect it with "
            f"`golive env collect --{expected}`"
        ) from exc
