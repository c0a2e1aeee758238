"""NCCL's own account of its transports in a startup log: the lines NCCL prints with
`NCCL_DEBUG=INFO` (`host:pid:tid [dev] NCCL INFO ...`, also behind a Ray or vLLM prefix).
Pure; unknown lines are ignored and nothing here raises on odd input.

What it reads, as NCCL prints it (2.21 to 2.28 alike):

- `Using network Socket` / `Using network IB` (or a NET plugin's name): the network NCCL
  chose for traffic between nodes, once per communicator and process;
- `comm 0x.. rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0`: how many nodes the
  communicator spans, as NCCL counted them, and whether multi-node NVLink carries it;
- `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM` (or `via NET/Socket/0`, `via SHM/...`): the
  transport each channel uses;
- `NET/IB : No device found.`, `Failed to initialize NET plugin IB`: why IB is not there;
- `NCCL_IB_DISABLE set by environment to 1.`: a setting NCCL took from the environment;
- `Bootstrap: Using eth0:192.0.2.2<0>`: the address each process bootstraps from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_NCCL = re.compile(
    r"(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[\d+\] (?:\S+ )?NCCL (?:INFO|WARN) (?P<msg>.*)$"
)
_NETWORK = re.compile(r"^Using network (?P<name>.+?)\s*$")
_COMM = re.compile(
    r"^comm \S+ rank \d+ nRanks (?P<ranks>\d+) nNodes (?P<nodes>\d+) localRanks (?P<local>\d+)"
    r"(?: localRank \d+ MNNVL (?P<mnnvl>\d+))?"
)
_VIA = re.compile(r"\bvia (?P<kind>[A-Za-z0-9]+(?:/[A-Za-z]+)?)")
_IB_ABSENT = re.compile(r"^(?:NET/IB ?: No device found|Failed to initialize NET plugin IB)")
_SETTING = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?$")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using \S+?:(?P<ip>[^<\s]+)<")


@dataclass(frozen=True, slots=True)
class NcclLine:
    """One NCCL line: its line number in the file, the host and process that printed it, and
    its message (NCCL's prefix stripped)."""

    line: int
    host: str
    pid: str
    message: str


@dataclass(frozen=True, slots=True)
class CommSpan:
    """The widest communicator NCCL reported: the most nodes any spans (with the line that
    says so), the most ranks, the most ranks on one node, and whether one that crosses nodes
    rides multi-node NVLink."""

    nodes: int
    line: NcclLine
    ranks: int
    local_ranks: int
    mnnvl: bool

    def widened(self, nodes: int, line: NcclLine, ranks: int, local: int, mnnvl: bool) -> CommSpan:
        """This span with one more communicator line taken in."""
        wider = nodes > self.nodes
        return CommSpan(
            nodes if wider else self.nodes,
            line if wider else self.line,
            max(ranks, self.ranks),
            max(local, self.local_ranks),
            self.mnnvl or (mnnvl and nodes > 1),
        )


@dataclass(frozen=True, slots=True)
class NcclFacts:
    """What NCCL's lines in one launch say; empty where the log has none (NCCL_DEBUG unset)."""

    lines: int = 0
    networks: tuple[tuple[str, NcclLine], ...] = ()  # (network name, its `Using network` line)
    comm: CommSpan | None = None  # None: no communicator line
    transports: tuple[str, ...] = ()  # the channels' transports (P2P/CUMEM, NET/Socket, SHM…)
    net_channel: NcclLine | None = None  # the first channel that goes over NET
    ib_absent: NcclLine | None = None  # the first line saying IB could not be used
    settings: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # var -> value, line
    addresses: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (host, pid) -> ip
    hosts: tuple[str, ...] = ()  # the host names NCCL printed, sorted

    def origin(self, line: NcclLine) -> str:
        """Which node printed `line`: NCCL's host name and its bootstrap address."""
        ip = self.addresses.get((line.host, line.pid))
        return f"host {line.host}" + (f" ({ip})" if ip else "")

    def on_sockets(self) -> list[NcclLine]:
        """The `Using network Socket` lines."""
        return [line for name, line in self.networks if name.lower() == "socket"]


def nccl_lines(lines: Sequence[str], first: int = 1) -> list[NcclLine]:
    """NCCL's lines among `lines`, numbered from `first`."""
    found = []
    for number, raw in enumerate(lines, start=first):
        if "NCCL" not in raw:
            continue
        match = _NCCL.search(raw)
        if match is not None:
            found.append(
                NcclLine(number, match.group("host"), match.group("pid"), match.group("msg"))
            )
    return found


def read_nccl(lines: Sequence[str], first: int = 1) -> NcclFacts:
    """NCCL's transports as its lines among `lines` state them (numbered from `first`)."""
    seen = nccl_lines(lines, first)
    networks: list[tuple[str, NcclLine]] = []
    transports: set[str] = set()
    settings: dict[str, tuple[str, int]] = {}
    addresses: dict[tuple[str, str], str] = {}
    comm: CommSpan | None = None
    net_channel = ib_absent = None
    for line in seen:
        message = line.message
        if (network := _NETWORK.match(message)) is not None:
            networks.append((network.group("name"), line))
        elif (counts := _COMM.match(message)) is not None:
            nodes, ranks, local = (int(counts.group(k)) for k in ("nodes", "ranks", "local"))
            mnnvl = counts.group("mnnvl") not in (None, "0")
            comm = (comm or CommSpan(0, line, 0, 0, False)).widened(
                nodes, line, ranks, local, mnnvl
            )
        elif message.startswith("Channel") and (via := _VIA.search(message)) is not None:
            transports.add(via.group("kind"))
            if via.group("kind").startswith("NET") and net_channel is None:
                net_channel = line
        elif _IB_ABSENT.match(message) and ib_absent is None:
            ib_absent = line
        elif (setting := _SETTING.match(message)) is not None:
            settings.setdefault(setting.group("name"), (setting.group("value"), line.line))
        elif (boot := _BOOTSTRAP.match(message)) is not None:
            addresses.setdefault((line.host, line.pid), boot.group("ip"))
    return NcclFacts(
        lines=len(seen),
        networks=tuple(networks),
        comm=comm,
        transports=tuple(sorted(transports)),
        net_channel=net_channel,
        ib_absent=ib_absent,
        settings=settings,
        addresses=addresses,
        hosts=tuple(sorted({line.host for line in seen})),
    )
