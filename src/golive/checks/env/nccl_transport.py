"""`environment.nccl_transport`: the network NCCL chose between nodes, and the container
settings that decide it (issue 34, "NCCL initialised across nodes without fallback").

The checklist asks, in the startup layer, to "check for CUDA initialization errors, NCCL
failures, missing kernels, unsupported architecture messages, and fallback paths"; in the
host layer, to "check Fabric Manager and interconnect-related services where the topology
requires them"; and at sign-off that "GPU count, topology, parallel settings, and
interconnect settings are recorded". Its rebuild outcome covers a deployment that is not
built as the supported chain. So:

- Where the engine spans two or more nodes, NCCL's traffic between nodes must ride the
  fabric (IB/RoCE, or a NET plugin such as AWS Libfabric). NCCL on TCP sockets (`Using
  network Socket`, channels `via NET/Socket`), or a container that forbids the fabric
  (`NCCL_IB_DISABLE=1`, `NCCL_NET=Socket`) or peer-to-peer inside each node
  (`NCCL_P2P_DISABLE=1`), is a deployment built wrong: a critical fail (`rebuild`) naming
  the line or file and the fix. Where the nodes' communicators all ride multi-node NVLink
  (`MNNVL 1` on every one that crosses nodes), sockets carry only what leaves the NVLink
  domain: a warn, not a rebuild.
- On one node the NET transport carries nothing (the ranks talk over P2P/NVLink or SHM), so
  `Using network Socket` and a failed IB plugin are normal there: pass. Channels between its
  ranks `via SHM` or `via NET/Socket` instead of P2P/NVLink are a fallback path: a warn.
- `NCCL_P2P_DISABLE=1` on one node with more than one rank: a warn (observe with limits, its
  owner named). It is a fallback path the checklist asks to record: the ranks copy through
  host memory (SHM) instead of NVLink/PCIe peer-to-peer, slower but correct, and it is often
  set on purpose to work around a host whose PCIe ACS/IOMMU breaks peer-to-peer, where
  removing it would hang the engine. That is not the version chain mismatch the checklist
  sends to rebuild; the capacity tests measure what it costs.
- Not measured: an engine that spans nodes with no line in the serving launch's log saying
  which network NCCL used (NCCL_DEBUG was not INFO, or the lines were taken out) and no
  setting to judge: `no_data`, critical (hold): a log without its NCCL lines must not fare
  better than the rebuild they might show. On one node with no NCCL line and no
  peer-to-peer setting there is nothing to judge (NCCL WARN lines alone do not say what it
  set up) and the check gives no result at all, so no pass is claimed and bundles sealed
  before this check (none carries it) still re-derive exactly as sealed.

Whether the engine spans nodes is judged from the engine (checks/env/engine_span.py: NCCL's
nNodes and host names, its Ray workers' addresses, its layout against one node's GPUs), never
from the number of host files: replicas of a one-node engine on several nodes are one node
to this check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.engine_span import EngineSpan, engine_span, engine_world
from golive.checks.env.startup_rules import other_launch
from golive.evidence.fabric import nvlink_domain
from golive.evidence.nccl_log import QUOTE, NcclFacts, NcclLine, read_nccl
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status

CHECK = "environment.nccl_transport"
_LEADING_NUMBER = re.compile(r"\s*[+-]?(0[xX][0-9a-fA-F]+|\d+)")
# the variables that keep NCCL off the fabric between nodes, and off peer-to-peer inside one
_NET_OFF = ("NCCL_IB_DISABLE", "NCCL_NET")
_P2P_OFF = "NCCL_P2P_DISABLE"
_QUOTED_HOSTS = 3  # the most nodes' lines quoted in one summary
EXPOSE_IB = (
    "expose the nodes' InfiniBand/RoCE devices to the container (/dev/infiniband through the "
    "RDMA device plugin, or `--device /dev/infiniband --cap-add IPC_LOCK`, with rdma-core in "
    "the image) so NCCL picks IB, and check for `Using network IB` in a new log"
)
MEASURE = (
    "relaunch with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET is enough) and pass that log "
    "with --log"
)


@dataclass(frozen=True, slots=True)
class Setting:
    """A transport setting the serving containers or NCCL's log show: variable, value, where."""

    name: str
    value: str
    where: str

    @property
    def off(self) -> bool:
        """Whether it turns a transport off: NCCL reads the *_DISABLE variables as integers
        (strtoll: the leading number, decimal, octal or hex; none is 0), NCCL_NET by name."""
        if self.name == "NCCL_NET":
            return self.value.strip().lower() == "socket"
        number = _LEADING_NUMBER.match(self.value)
        return number is not None and any(c not in "0xX" for c in number.group(1))

    def shown(self) -> str:
        return f"{self.name}={self.value} ({self.where})"


def transport_settings(inputs: ChainInputs, nccl: NcclFacts) -> list[Setting]:
    """Every transport setting that turns something off: each serving container's variables
    (its path named; a value another container already showed is named once), and every
    value NCCL's log says a node took from the environment."""
    found: list[Setting] = []
    containers = [(inputs.container, inputs.container_path), *inputs.node_containers]
    for container, path in containers:
        if container is None:
            continue
        for name in (*_NET_OFF, _P2P_OFF):
            value = container.environment.get(name)
            if value is not None and all((s.name, s.value) != (name, value) for s in found):
                found.append(Setting(name, value[:QUOTE], f"{path}#environment.{name}"))
    for name, values in sorted(nccl.settings.items()):
        if name in (*_NET_OFF, _P2P_OFF):
            found += [Setting(name, v, f"{inputs.startup_path}#L{line}") for v, line in values]
    return [s for s in found if s.off]


def _serving_nccl(inputs: ChainInputs) -> tuple[NcclFacts, str]:
    """NCCL's lines of the launch that serves, and a note where the log is another launch's
    (its lines then prove nothing here)."""
    facts = inputs.startup
    if facts is None:
        return NcclFacts(), ""
    if other_launch(inputs):  # its NCCL lines say nothing of the serving launch
        return NcclFacts(), " (the startup log is another launch's, and so are its NCCL lines)"
    return read_nccl(facts.launch_lines(), facts.first_line), ""


def _gpu_nodes(inputs: ChainInputs) -> int:  # recorded: the nodes of the host evidence
    return len({host.node for host, _ in inputs.hosts if host.gpus})


def _line(inputs: ChainInputs, line: NcclLine) -> str:
    return f"{inputs.startup_path}#L{line.line}"


def _quote(nccl: NcclFacts, line: NcclLine) -> str:
    return f'"{line.message[:QUOTE]}" (line {line.line}, {nccl.origin(line)})'


def check_nccl_transport(inputs: ChainInputs) -> CheckResult | None:
    """The transport NCCL uses between nodes and inside each; None where there is nothing to
    judge (an engine not shown to span nodes, no NCCL line, no peer-to-peer setting)."""
    nccl, note = _serving_nccl(inputs)
    settings = transport_settings(inputs, nccl)
    span = engine_span(inputs, nccl)
    measurements: dict[str, float | int | str | bool | None] = {
        "gpu_nodes": _gpu_nodes(inputs),
        "engine_nodes": span.nodes,
        "nccl_nodes": None if nccl.comm is None else nccl.comm.nodes,
        "nccl_lines": nccl.lines,
        "network": ", ".join(sorted({name for name, _ in nccl.networks}))[:QUOTE] or None,
        "transports": ", ".join(nccl.transports)[:QUOTE] or None,
        **{s.name: s.value for s in settings},
    }
    if span.nodes >= 2:
        return _across_nodes(inputs, nccl, settings, span, measurements, note)
    return _one_node(inputs, nccl, settings, measurements)


def _across_nodes(
    inputs: ChainInputs,
    nccl: NcclFacts,
    settings: list[Setting],
    span: EngineSpan,
    measurements: dict[str, float | int | str | bool | None],
    note: str,
) -> CheckResult:
    """The engine spans two or more nodes: the fabric between them, and peer-to-peer inside
    each."""
    spans = f"the engine spans {span.nodes} nodes ({span.why})"
    sockets = nccl.on_sockets()
    net_off = [s for s in settings if s.name in _NET_OFF]
    p2p_off = [s for s in settings if s.name == _P2P_OFF and _several_per_node(inputs, nccl)]
    problems, where = [], []
    if sockets and not _on_nvlink(inputs, nccl):
        why = _why_sockets(nccl, net_off)
        per_host = _first_per_host(sockets)[:_QUOTED_HOSTS]
        problems.append(
            "NCCL sends the traffic between nodes over TCP sockets, not the fabric: "
            + "; ".join(_quote(nccl, line) for line in per_host)
            + f"{why}: "
            + ("remove " + ", ".join(s.shown() for s in net_off) + " and " if net_off else "")
            + EXPOSE_IB
        )
        where += [_line(inputs, line) for line in per_host]
        where += [_line(inputs, x) for x in (nccl.net_channel, nccl.ib_absent) if x]
    elif net_off and not nccl.says_transport():  # unmeasured, but the container forbids the fabric
        problems.append(
            "the container keeps NCCL off the fabric between nodes: "
            + ", ".join(s.shown() for s in net_off)
            + ": remove the variable(s) so NCCL uses IB/RoCE"
        )
        where += [s.where for s in net_off]
    if p2p_off:
        problems.append(
            "peer-to-peer between the GPUs of each node is switched off: "
            + ", ".join(s.shown() for s in p2p_off)
            + ": remove the variable so NCCL uses NVLink/PCIe peer-to-peer"
        )
        where += [s.where for s in p2p_off]
    if problems:
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.FAIL,
            f"{spans}; " + "; ".join(problems) + note,
            measurements,
            evidence=list(dict.fromkeys(where)),
        )
    if sockets:  # on multi-node NVLink: sockets carry only what leaves the domain
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.WARN,
            f"{spans} over multi-node NVLink; NCCL's network for anything outside the NVLink "
            f"domain is TCP sockets: {_quote(nccl, sockets[0])}: {EXPOSE_IB}" + note,
            measurements,
            evidence=[_line(inputs, sockets[0])],
        )
    said = nccl.networks[0][1] if nccl.networks else nccl.net_channel
    if said is None:
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.NO_DATA,
            f"{spans}, but the serving launch's log has no `Using network` or channel line "
            f"from NCCL, so the network between the nodes is not measured{note}: {MEASURE}",
            measurements,
            critical=True,  # never better than the rebuild the missing lines may hide
            evidence=[inputs.startup_path] if inputs.startup is not None else [],
        )
    network = measurements["network"] or ", ".join(
        t for t in nccl.transports if t.startswith("NET")
    )  # where no `Using network` line says it, the channels do
    return ENVIRONMENT_RESULT(
        CHECK,
        Status.PASS,
        f"{spans}; NCCL uses network {network} between them: {_quote(nccl, said)}",
        measurements,
        evidence=[_line(inputs, said)],
    )


def _one_node(
    inputs: ChainInputs,
    nccl: NcclFacts,
    settings: list[Setting],
    measurements: dict[str, float | int | str | bool | None],
) -> CheckResult | None:
    """One node (the engine is not shown to span more; NCCL's lines, if any, come from one
    host): NCCL's network carries nothing; peer-to-peer between its GPUs does."""
    p2p_off = [s for s in settings if s.name == _P2P_OFF]
    ranks = _ranks(inputs, nccl)
    if p2p_off and ranks > 1:
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.WARN,
            f"peer-to-peer between the node's GPUs is switched off for {ranks} ranks: "
            + ", ".join(s.shown() for s in p2p_off)
            + ": NCCL falls back to copies through host memory (SHM), slower than NVLink/PCIe "
            "peer-to-peer; remove the variable, or keep it only where the host's PCIe "
            "ACS/IOMMU breaks peer-to-peer, and name that as the owner's known limit",
            measurements,
            evidence=[s.where for s in p2p_off],
        )
    fallback = [(kind, line) for kind, line in nccl.channels if _fallback(kind)]
    if fallback and ranks > 1:
        kinds = sorted({kind for kind, _ in fallback})
        first = min((line for _, line in fallback), key=lambda x: x.line)
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.WARN,
            f"NCCL's {ranks} ranks on one node talk via {', '.join(kinds)}, not NVLink/PCIe "
            f"peer-to-peer: {_quote(nccl, first)}: a fallback path, slower than P2P; find why "
            "peer-to-peer is not available (`nvidia-smi topo -p2p r`, the host's PCIe "
            "ACS/IOMMU, the container's IPC and device access) or name it as the owner's "
            "known limit",
            measurements,
            evidence=[_line(inputs, first)],
        )
    said = nccl.comm.line if nccl.comm is not None else None
    said = said or (nccl.networks[0][1] if nccl.networks else None)
    if said is None:  # no INFO line saying what NCCL set up
        return None
    inside = f" over {measurements['transports']}" if nccl.transports else ""
    network = measurements["network"]
    return ENVIRONMENT_RESULT(
        CHECK,
        Status.PASS,
        f"one node: NCCL's ranks talk{inside}; its network"
        + (f" ({network})" if network else "")
        + " carries no traffic between nodes, so IB is not needed",
        measurements,
        evidence=[_line(inputs, said)],
    )


def _fallback(transport: str) -> bool:
    """A channel transport inside one node that is not peer-to-peer: host memory, or NCCL's
    network looped back."""
    return transport.upper().startswith(("SHM", "NET/SOCKET"))


def _first_per_host(lines: list[NcclLine]) -> list[NcclLine]:
    """The first of `lines` from each host, in the log's order."""
    first: dict[str, NcclLine] = {}
    for line in lines:
        first.setdefault(line.host, line)
    return list(first.values())


def _why_sockets(nccl: NcclFacts, net_off: list[Setting]) -> str:
    """Why NCCL is on sockets, as the evidence says: a setting, or IB missing."""
    if net_off:
        return " because " + ", ".join(s.shown() for s in net_off)
    if nccl.ib_absent is not None:
        return f' because IB is not there: "{nccl.ib_absent.message}" (line {nccl.ib_absent.line})'
    return ""


def _on_nvlink(inputs: ChainInputs, nccl: NcclFacts) -> bool:
    """The nodes' communicator rides multi-node NVLink: NCCL says so (`MNNVL 1`), or, where
    no communicator line says either way, every GPU node is in one NVLink domain."""
    if nccl.comm is not None:
        return nccl.comm.mnnvl
    domains = {nvlink_domain(host) for host, _ in inputs.hosts if host.gpus}
    return len(domains) == 1 and None not in domains


def _several_per_node(inputs: ChainInputs, nccl: NcclFacts) -> bool:
    """More than one rank on a node (peer-to-peer has something to carry): NCCL's count,
    else the most GPUs a host has, else assumed."""
    if nccl.comm is not None:
        return nccl.comm.local_ranks > 1
    most = max((len(host.gpus) for host, _ in inputs.hosts), default=None)
    return most is None or most > 1


def _ranks(inputs: ChainInputs, nccl: NcclFacts) -> int:
    """The engine's ranks: tp*pp*dp as it started, or NCCL's widest communicator."""
    return max(engine_world(inputs), nccl.comm.ranks if nccl.comm is not None else 0)
