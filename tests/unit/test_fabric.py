"""Issue 29 §6: the NVLink fabric and IMEX, judged where collected. The real H200 hosts (one
node's NVSwitch fabric: state Completed, cluster UUID all zeros) need no IMEX; two nodes of
one multi-node NVLink domain (GB200 NVL72's shape: a non-zero fabric cluster UUID, the
H200 captures given one here) need the IMEX service active on each, and its domain UP."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.gpus import check_gpus
from golive.evidence.fabric import NO_DOMAIN, fabric_findings, imex_domain_state
from golive.evidence.facts import HostInfo, read_facts
from golive.evidence.nvidia import parse_nvidia_smi_xml
from golive.profiles import load_profile
from golive.results import Status

DATA = Path(__file__).parent.parent / "data"
DOMAIN = "6f1e5a4c-2b7d-4e1a-9c3b-1d2e3f4a5b6c"
UP = "Nodes:\nNode #0 - 10.0.0.1 - READY - Version: 580.65\nDomain State: UP\n"
DOWN = "Nodes:\nNode #0 - 10.0.0.1 - READY\nNode #1 - 10.0.0.2 - UNAVAILABLE\nDomain State: DOWN\n"


def _node(name: str, domain: str | None = DOMAIN, **host: object) -> HostInfo:
    """The real two-H200 host, as node `name` (its GPUs' UUIDs made its own), its GPUs in
    NVLink domain `domain`."""
    real = read_facts(DATA / "gpu-h200-x2/host-nvml.json", HostInfo)
    gpus = tuple(
        g.model_copy(update={"fabric_cluster_uuid": domain, "uuid": f"{g.uuid}-{name}"})
        for g in real.gpus
    )
    return real.model_copy(update={"node": name, "gpus": gpus, **host})


def _gpus(*hosts: HostInfo) -> tuple[Status, str]:
    inputs = ChainInputs(
        profile=load_profile("generic"), hosts=tuple((h, f"{h.node}.json") for h in hosts)
    )
    result = check_gpus(inputs)
    return result.status, result.summary


def test_the_real_h200_xml_has_no_multi_node_domain() -> None:
    """`nvidia-smi -q -x` on the H200 host: the fabric's cluster UUID and clique id are read,
    and all zeros is no multi-node NVLink domain (no IMEX asked of it)."""
    xml = (DATA / "gpu-h200-x2/nvidia-smi-q.xml").read_text()
    host = parse_nvidia_smi_xml(xml, "h200")
    assert {(g.fabric_cluster_uuid, g.fabric_clique_id) for g in host.gpus} == {(NO_DOMAIN, "0")}
    two = [host, host.model_copy(update={"node": "h200-b"})]
    assert fabric_findings(two).domains == {}
    assert not fabric_findings(two).failures


@pytest.mark.parametrize(
    ("imex", "domain_text", "status", "named"),
    [
        ("active", UP, Status.PASS, None),
        ("active", None, Status.PASS, None),  # no nvidia-imex-ctl on the node: the service says
        ("inactive", UP, Status.PASS, None),  # IMEX in pods (DRA driver): the domain says UP
        ("inactive", None, Status.WARN, "the host's IMEX service (nvidia-imex) is inactive"),
        ("failed", None, Status.WARN, "collect `nvidia-imex-ctl -N` there"),
        ("active", DOWN, Status.FAIL, "Domain State DOWN, not UP"),
        (None, None, Status.WARN, "the IMEX service's state was not collected"),
    ],
    ids=["up", "service-only", "pods", "inactive", "failed", "domain-down", "not-collected"],
)
def test_imex_on_a_multi_node_nvlink_domain(
    imex: str | None, domain_text: str | None, status: Status, named: str | None
) -> None:
    """Two nodes of one domain: IMEX active, or its domain UP, passes; a domain read as not
    UP fails the GPU check (the GPUs cannot share memory across it: rebuild); a host unit not
    active with no domain state read (IMEX may run in pods), or nothing collected, is named
    as a warn, never passed silently and never a false rebuild."""
    good = _node("a", imex="active", imex_domain=UP)
    other = _node("b", imex=imex, imex_domain=domain_text)
    got, summary = _gpus(good, other)
    assert got is status, summary
    if named is not None:
        assert named in summary
        assert f"b (multi-node NVLink domain {DOMAIN})" in summary


def test_one_node_or_no_domain_needs_no_imex() -> None:
    """IMEX is asked only of a deployment across nodes of a multi-node NVLink domain: one
    node alone (also when two records name it: the same GPUs), or nodes with no domain,
    pass without it."""
    assert _gpus(_node("a", imex="inactive"))[0] is Status.PASS
    twice = _node("a", imex="inactive").model_copy(update={"node": "a-2"})
    assert _gpus(_node("a", imex="inactive"), twice)[0] is Status.PASS
    assert _gpus(_node("a", NO_DOMAIN), _node("b", None))[0] is Status.PASS


def test_nodes_in_different_domains_are_named() -> None:
    """Two nodes in two NVLink domains: a warn saying traffic between them leaves NVLink."""
    other = "0a0b0c0d-0000-4000-8000-000000000001"
    status, summary = _gpus(_node("a", imex="active"), _node("b", other, imex="active"))
    assert status is Status.WARN
    assert "2 different NVLink domains" in summary


def test_fabric_manager_named_beside_a_stuck_fabric() -> None:
    """A fabric still registering fails (CUDA error 802), naming the collected state of
    nvidia-fabricmanager."""
    real = read_facts(DATA / "gpu-h200-x2/host-nvml.json", HostInfo)
    stuck = real.model_copy(
        update={
            "fabric_manager": "failed",
            "gpus": tuple(g.model_copy(update={"fabric_state": "In Progress"}) for g in real.gpus),
        }
    )
    status, summary = _gpus(stuck)
    assert status is Status.FAIL
    assert "error 802" in summary
    assert "nvidia-fabricmanager is failed" in summary


def test_domain_state_read_from_imex_ctl() -> None:
    """`Domain State:` read from `nvidia-imex-ctl -N`, None where absent."""
    assert imex_domain_state(UP) == "UP"
    assert imex_domain_state(DOWN) == "DOWN"
    assert imex_domain_state("garbage") is None
    assert imex_domain_state(None) is None
