"""The NVLink fabric of the nodes, judged (issue 29 §6): each GPU's fabric registration
(NVSwitch systems: nvidia-fabricmanager must have finished), and, for a deployment across
nodes of one multi-node NVLink domain (GB200 NVL72 and the like: GPUs with a non-zero fabric
cluster UUID), the IMEX service on every node, which imports and exports GPU memory across
the domain. Pure: facts in, findings out; judged where collected, and named where not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from golive.evidence.facts import HostInfo

NO_DOMAIN = "00000000-0000-0000-0000-000000000000"  # a GPU in no multi-node NVLink domain
_DOMAIN_STATE = re.compile(r"^\s*Domain State\s*:\s*(\S+)", re.M | re.I)


@dataclass
class FabricFindings:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    domains: dict[str, str] = field(default_factory=dict)  # node -> its NVLink domain


def nvlink_domain(host: HostInfo) -> str | None:
    """The multi-node NVLink domain (fabric cluster UUID) a node's GPUs belong to, or None."""
    found = {
        gpu.fabric_cluster_uuid
        for gpu in host.gpus
        if gpu.fabric_cluster_uuid and gpu.fabric_cluster_uuid != NO_DOMAIN
    }
    return ", ".join(sorted(found)) if found else None


def imex_domain_state(text: str | None) -> str | None:
    """`Domain State: UP` in `nvidia-imex-ctl -N`'s output; None where it is not there."""
    if not text:
        return None
    match = _DOMAIN_STATE.search(text)
    return match.group(1).upper() if match else None


def fabric_findings(hosts: Sequence[HostInfo]) -> FabricFindings:
    """Failures (the fabric cannot carry this deployment) and warnings (not collected, or a
    deployment split across NVLink domains)."""
    found = FabricFindings()
    for host in hosts:
        manager = f"; nvidia-fabricmanager is {host.fabric_manager}" if host.fabric_manager else ""
        for gpu in host.gpus:
            if gpu.fabric_state not in (None, "Completed") or gpu.fabric_status not in (
                None,
                "Success",
            ):
                found.failures.append(
                    f"{host.node} GPU {gpu.index}: fabric {gpu.fabric_state}/"
                    f"{gpu.fabric_status} (CUDA will fail with error 802 until "
                    f"nvidia-fabricmanager finishes{manager})"
                )
        domain = nvlink_domain(host)
        if domain is not None:
            found.domains[host.node] = domain
    # one node however many records name it (the same GPUs under two names: one node)
    machines = {_machine(h) for h in hosts if h.node in found.domains}
    if len(machines) < 2:
        return found  # one node, or none in a multi-node domain: no IMEX asked
    for host in hosts:
        domain = found.domains.get(host.node)
        if domain is not None:
            _imex(host, f"{host.node} (multi-node NVLink domain {domain})", found)
    apart = sorted(set(found.domains.values()))
    if len(apart) > 1:
        found.warnings.append(
            f"the nodes are in {len(apart)} different NVLink domains ({'; '.join(apart)}): "
            "traffic between them leaves NVLink for the network"
        )
    return found


def _imex(host: HostInfo, where: str, found: FabricFindings) -> None:
    """IMEX on one node of a multi-node domain: `nvidia-imex-ctl -N`'s domain state decides
    where it was read (IMEX may run in pods, its host unit masked: NVIDIA's DRA driver);
    else the host's systemd unit, whose state other than active is named, not failed."""
    state = imex_domain_state(host.imex_domain)
    if state == "UP":
        return
    if state is not None:
        found.failures.append(
            f"{where}: nvidia-imex-ctl -N says Domain State {state}, not UP: a node of the "
            "IMEX domain is down or not connected, so GPU memory cannot be imported across "
            "the domain (CUDA fabric handles fail; NCCL falls back to the network)"
        )
    elif host.imex is None:
        found.warnings.append(
            f"{where}: the IMEX service's state was not collected; run `golive env collect "
            "--host` on the node (it reads `systemctl is-active nvidia-imex` and "
            "`nvidia-imex-ctl -N`)"
        )
    elif host.imex != "active":
        found.warnings.append(
            f"{where}: the host's IMEX service (nvidia-imex) is {host.imex} and no IMEX domain "
            "state was read: start it on every node of the domain, or, where IMEX runs in "
            "pods (NVIDIA DRA driver), collect `nvidia-imex-ctl -N` there"
        )


def _machine(host: HostInfo) -> frozenset[str] | str:
    """What tells two nodes apart: their GPUs' UUIDs, else the node's name."""
    uuids = frozenset(g.uuid for g in host.gpus if g.uuid)
    return uuids or host.node
