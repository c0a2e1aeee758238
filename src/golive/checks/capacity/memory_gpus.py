"""The GPUs `capacity.memory` judges: the engine's, of the host golive ran on — those the serving
container's torch saw (by UUID), else, with golive beside a loopback target, those holding at
least what the engine printed it allocated — each held to the env section's host records."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from golive.bundle.layout import CONTAINER, GPU_DEVICES, MEMORY_CURVE
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory_curve import SavedCurve

MAX_GPU_MIB = 2**20  # 1 TiB: a total above it is not a GPU's
_GIB = 1024.0


def engine_gpus(
    evidence: BundleReader,
    own: Any,
    curve: SavedCurve,
    allocated_mib: float,
    target_url: str | None,
) -> tuple[list[tuple[int, float]], str]:
    """(NVML index, memory total) of each GPU of this host that is the engine's, or why none
    can be judged: the serving container's GPUs by UUID, else — golive beside a loopback
    target — those holding at least what the engine allocated. `own`: `memory/gpus.json` as
    read, not empty."""
    inventory, problem = _inventory(evidence, own)
    if problem:
        return [], problem
    seen = _container_uuids(evidence)
    if seen:
        mine = [g for g in inventory if g[2] in seen]
        if not mine:
            return [], (
                f"the GPUs golive's host has ({GPU_DEVICES}) are not the serving container's "
                f"({CONTAINER}): golive ran on another host than the engine"
            )
    elif _loopback(target_url):
        mine = [g for g in inventory if (curve.peak(f"gpu{g[0]}_used_mib") or 0) >= allocated_mib]
        if not mine:
            return [], (
                f"no GPU of this host held what the engine printed it allocated "
                f"({allocated_mib / _GIB:.1f} GiB: weights, CUDA graphs, KV cache) in "
                f"{MEMORY_CURVE}: not the engine's GPUs"
            )
    else:
        return [], (
            f"golive ran on another host than the engine (target {target_url}) and no "
            f"{CONTAINER} names the engine's GPUs: the NVML curve is not the engine's"
        )
    listed = {i for i, _, _ in inventory}
    unlisted = sorted(
        c for c in curve.columns if c.endswith("_used_mib") and _index(c) not in listed
    )
    if unlisted:
        return [], f"{MEMORY_CURVE} has {', '.join(unlisted)}, a GPU {GPU_DEVICES} does not list"
    short = [f"GPU{i}" for i, _, _ in mine if curve.peak(f"gpu{i}_used_mib") is None]
    if short:
        return [], f"{', '.join(short)} never read in {MEMORY_CURVE}"
    for index, total, _ in mine:
        sampled = {v for _, v in curve.columns.get(f"gpu{index}_total_mib", ())}
        if sampled and sampled != {float(int(total))}:
            return [], (
                f"GPU memory totals disagree: {GPU_DEVICES} says {total:.0f} MiB for GPU "
                f"{index}, {MEMORY_CURVE} {', '.join(f'{v:.0f}' for v in sorted(sampled))} MiB"
            )
    return [(i, total) for i, total, _ in mine], ""


def _inventory(evidence: BundleReader, own: Any) -> tuple[list[tuple[int, float, str | None]], str]:
    """The sampler's GPUs (index, memory total, UUID); each must be a plausible total and,
    where the env section recorded hosts, a GPU of one of them with the same index and total."""
    hosts: dict[str, tuple[Any, Any]] = {  # UUID: (NVML index, total) on its host
        gpu["uuid"]: (gpu.get("index"), gpu.get("memory_total_mib"))
        for gpu in host_gpus(evidence)
        if isinstance(gpu.get("uuid"), str)
    }
    out: list[tuple[int, float, str | None]] = []
    for gpu in own if isinstance(own, list) else [own]:
        index = gpu.get("index") if isinstance(gpu, Mapping) else None
        total = gpu.get("memory_total_mib") if isinstance(gpu, Mapping) else None
        found = gpu.get("uuid") if isinstance(gpu, Mapping) else None
        uuid = found if isinstance(found, str) else None
        if not isinstance(index, int) or isinstance(index, bool) or not _plausible(total):
            return [], f"{GPU_DEVICES}: not a GPU inventory ({gpu!r:.120})"
        if hosts and (uuid is None or uuid not in hosts or not _plausible(hosts[uuid][1])):
            return [], (
                f"{GPU_DEVICES}: GPU {index} ({uuid}) is not a GPU of the env section's host "
                "records: this host's GPUs are not the serving node's"
            )
        if hosts and uuid is not None and hosts[uuid][0] != index:
            return [], (
                f"{GPU_DEVICES} says GPU {index} is {uuid}, the host record says that GPU is "
                f"index {hosts[uuid][0]}: the curve's columns cannot be told apart"
            )
        if hosts and uuid is not None and abs(float(hosts[uuid][1]) - float(total)) > 1:
            return [], (
                f"GPU memory totals disagree: {GPU_DEVICES} says {total} MiB for GPU {index}, "
                f"the host record {hosts[uuid][1]} MiB"
            )
        out.append((index, float(total), uuid))
    return out, ""


def host_gpus(evidence: BundleReader) -> list[Mapping[str, Any]]:
    """Every GPU the env section's host records (`environment/host-*.json`) list."""
    out = []
    for path in sorted((evidence.root / "environment").glob("host-*.json")):
        record = evidence.json(f"environment/{path.name}")
        gpus = (record.get("gpus") if isinstance(record, Mapping) else None) or ()
        out += [gpu for gpu in gpus if isinstance(gpu, Mapping)]
    return out


def _index(column: str) -> int | None:
    digits = column.removeprefix("gpu").split("_", 1)[0]
    return int(digits) if digits.isdigit() else None


def _plausible(total: object) -> TypeGuard[int | float]:
    return (
        isinstance(total, int | float)
        and not isinstance(total, bool)
        and math.isfinite(total)
        and 0 < total <= MAX_GPU_MIB
    )


def _container_uuids(evidence: BundleReader) -> set[str]:
    container = evidence.json(CONTAINER)
    gpus = container.get("gpus") if isinstance(container, Mapping) else None
    return {
        g["uuid"] for g in gpus or () if isinstance(g, Mapping) and isinstance(g.get("uuid"), str)
    }


def _loopback(url: str | None) -> bool:
    host = urlsplit(url or "").hostname
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
