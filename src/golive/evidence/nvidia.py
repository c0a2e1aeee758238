"""Pure parsers of NVIDIA tool output: `nvidia-smi -q -x` XML and /proc/driver/nvidia/version."""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from golive.errors import EvidenceError
from golive.evidence.facts import GpuInfo, HostInfo


def driver_major(version: str | None) -> int | None:
    """580 for "580.159.04"; None when absent or unreadable."""
    if not version:
        return None
    match = re.match(r"(\d+)", version.strip())
    return int(match.group(1)) if match else None


def cuda_major(version: str | int | None) -> int | None:
    """13 for "13.0", 13000 or "13.0.88"; None when absent."""
    if version is None or version == "":
        return None
    if isinstance(version, int):
        return version // 1000
    match = re.match(r"(\d+)", str(version))
    return int(match.group(1)) if match else None


def parse_proc_version(text: str) -> str | None:
    """The kernel module version from /proc/driver/nvidia/version."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def _text(node: Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A") else value


def _mib(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.match(r"(\d+)\s*MiB", value)
    return int(match.group(1)) if match else None


def parse_nvidia_smi_xml(text: str, node: str, source_name: str = "nvidia-smi -q -x") -> HostInfo:
    """Host facts from `nvidia-smi -q -x`; `EvidenceError` if it is not that XML."""
    try:
        root = ElementTree.fromstring(text)
    except (ElementTree.ParseError, DefusedXmlException) as exc:
        raise EvidenceError(f"{source_name}: not nvidia-smi XML ({exc})") from exc
    if root.tag != "nvidia_smi_log":
        raise EvidenceError(f"{source_name}: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append(
            GpuInfo(
                index=index,
                name=_text(gpu, "product_name") or "unknown",
                uuid=_text(gpu, "uuid"),
                pci_bus_id=gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
                memory_total_mib=_mib(_text(gpu, "fb_memory_usage/total")),
                persistence_mode=_text(gpu, "persistence_mode"),
                mig_mode=_text(gpu, "mig_mode/current_mig"),
                fabric_state=_text(gpu, "fabric/state"),
                fabric_status=_text(gpu, "fabric/status"),
                fabric_cluster_uuid=_text(gpu, "fabric/clusterUuid"),
                fabric_clique_id=_text(gpu, "fabric/cliqueId"),
            )
        )
    return HostInfo(
        node=node,
        source="nvidia-smi-xml",
        collected_at=_text(root, "timestamp"),
        driver_version=_text(root, "driver_version"),
        cuda_driver_version=_text(root, "cuda_version"),
        gpus=tuple(gpus),
    )
