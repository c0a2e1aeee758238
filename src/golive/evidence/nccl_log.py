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

Ray's log deduplication colours its prefix and ends a line it folded with
` [repeated 7x across cluster]` (in ANSI colour, the first time with a note on
RAY_DEDUP_LOGS): both are taken off before a line is read. Numbers longer than nine digits
are no count NCCL prints: such a line is not read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from golive.evidence.terminal import without_ansi

_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\].*$")
_NCCL = re.compile(
    r"(?P<host>[\w.-]+):(?P<pid>\d{1,9}):\d{1,9} \[\d{1,9}\] (?:\S+ )?NCCL (?:INFO|WARN) "
    r"(?P<msg>.*)$"
)
_NETWORK = re.compile(r"^Using network (?P<name>.+?)\s*$")
_COMM = re.compile(
    r"^comm \S+ rank \d{1,9} nRanks (?P<ranks>\d{1,9}) nNodes (?P<nodes>\d{1,9}) "
    r"localRanks (?P<local>\d{1,9})(?: localRank \d{1,9} MNNVL (?P<mnnvl>\d{1,9}))?(?!\d)"
)
_VIA = re.compile(r"\bvia (?P<kind>[A-Za-z0-9]+(?:/[A-Za-z]+)?)")
_IB_ABSENT = re.compile(r"^(?:NET/IB ?: No device found|Failed to initialize NET plugin IB)")
_SETTING = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?$")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using \S+?:(?P<ip>[^<\s]+)<")
QUOTE = 300  # the most characters of a log line quoted or measured, as startup signatures
_VALUES = 8  # the most distinct values kept for one variable


def _count(text: str | None) -> int | None:
    """A count NCCL printed (at most nine digits by the patterns); None where it is none."""
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def clean(raw: str) -> str:
    """A log line without ANSI colour and Ray's `[repeated Nx across cluster]` suffix."""
    return _RAY_REPEATED.sub("", without_ansi(raw)).rstrip("\r")


@dataclass(frozen=True, slots=True)
class NcclLine:
    """One NCCL line: its line number in the file, the host and process that printed it, and
    its message (NCCL's prefix, colour and Ray's dedup suffix stripped)."""

    line: int
    host: str
    pid: str
    message: str


@dataclass(frozen=True, slots=True)
class CommSpan:
    """The widest communicator NCCL reported: the most nodes any spans (with the line that
    says so), the most ranks, the most ranks on one node, and whether every communicator that
    crosses nodes rides multi-node NVLink (False where none crosses)."""

    nodes: int
    line: NcclLine
    ranks: int
    local_ranks: int
    mnnvl: bool


@dataclass(frozen=True, slots=True)
class _Comm:
    nodes: int
    line: NcclLine
    ranks: int
    local: int
    mnnvl: bool


def _span(comms: list[_Comm]) -> CommSpan | None:
    if not comms:
        return None
    widest = max(comms, key=lambda c: c.nodes)  # the first of the widest
    crossing = [c for c in comms if c.nodes > 1]
    return CommSpan(
        widest.nodes,
        widest.line,
        max(c.ranks for c in comms),
        max(c.local for c in comms),
        bool(crossing) and all(c.mnnvl for c in crossing),
    )


@dataclass(frozen=True, slots=True)
class NcclFacts:
    """What NCCL's lines in one launch say; empty where the log has none (NCCL_DEBUG unset)."""

    lines: int = 0
    networks: tuple[tuple[str, NcclLine], ...] = ()  # (network name, its `Using network` line)
    comm: CommSpan | None = None  # None: no communicator line
    transports: tuple[str, ...] = ()  # the channels' transports (P2P/CUMEM, NET/Socket, SHM…)
    net_channel: NcclLine | None = None  # the first channel that goes over NET
    # the first channel of each transport from each host: (transport, its line)
    channels: tuple[tuple[str, NcclLine], ...] = ()
    ib_absent: NcclLine | None = None  # the first line saying IB could not be used
    # var -> each distinct value NCCL took from the environment, with the first line saying it
    settings: Mapping[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    addresses: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (host, pid) -> ip
    hosts: tuple[str, ...] = ()  # the host names NCCL printed, sorted

    def origin(self, line: NcclLine) -> str:
        """Which node printed `line`: NCCL's host name and its bootstrap address."""
        ip = self.addresses.get((line.host, line.pid))
        return f"host {line.host}" + (f" ({ip})" if ip else "")

    def on_sockets(self) -> list[NcclLine]:
        """The `Using network Socket` lines, and the channels `via NET/Socket`."""
        return [line for name, line in self.networks if name.lower() == "socket"] + [
            line for kind, line in self.channels if kind.lower() == "net/socket"
        ]

    def says_transport(self) -> bool:
        """Whether a line says which network NCCL used: `Using network`, or a NET channel."""
        return bool(self.networks) or self.net_channel is not None


def nccl_lines(lines: Sequence[str], first: int = 1) -> list[NcclLine]:
    """NCCL's lines among `lines`, numbered from `first`."""
    found = []
    for number, raw in enumerate(lines, start=first):
        if "NCCL" not in raw:
            continue
        match = _NCCL.search(clean(raw))
        if match is not None:
            found.append(
                NcclLine(number, match.group("host"), match.group("pid"), match.group("msg"))
            )
    return found


def _comm(message: str, line: NcclLine) -> _Comm | None:
    counts = _COMM.match(message)
    if counts is None:
        return None
    nodes, ranks, local = (_count(counts.group(k)) for k in ("nodes", "ranks", "local"))
    if nodes is None or ranks is None or local is None:
        return None
    return _Comm(nodes, line, ranks, local, counts.group("mnnvl") not in (None, "0"))


def _keep_setting(
    settings: dict[str, list[tuple[str, int]]], name: str, value: str, at: int
) -> None:
    values = settings.setdefault(name, [])
    if len(values) < _VALUES and all(value != v for v, _ in values):
        values.append((value[:QUOTE], at))


def read_nccl(lines: Sequence[str], first: int = 1) -> NcclFacts:
    """NCCL's transports as its lines among `lines` state them (numbered from `first`)."""
    seen = nccl_lines(lines, first)
    networks: list[tuple[str, NcclLine]] = []
    channels: dict[tuple[str, str], NcclLine] = {}
    settings: dict[str, list[tuple[str, int]]] = {}
    addresses: dict[tuple[str, str], str] = {}
    comms: list[_Comm] = []
    ib_absent = None
    for line in seen:
        message = line.message
        if (network := _NETWORK.match(message)) is not None:
            networks.append((network.group("name")[:QUOTE], line))
        elif (comm := _comm(message, line)) is not None:
            comms.append(comm)
        elif message.startswith("Channel") and (via := _VIA.search(message)) is not None:
            channels.setdefault((via.group("kind"), line.host), line)
        elif _IB_ABSENT.match(message) and ib_absent is None:
            ib_absent = line
        elif (setting := _SETTING.match(message)) is not None:
            _keep_setting(settings, setting.group("name"), setting.group("value"), line.line)
        elif (boot := _BOOTSTRAP.match(message)) is not None:
            addresses.setdefault((line.host, line.pid), boot.group("ip")[:QUOTE])
    net = [line for (kind, _), line in channels.items() if kind.startswith("NET")]
    return NcclFacts(
        lines=len(seen),
        networks=tuple(networks),
        comm=_span(comms),
        transports=tuple(sorted({kind for kind, _ in channels})),
        net_channel=min(net, key=lambda x: x.line, default=None),
        channels=tuple((kind, line) for (kind, _), line in channels.items()),
        ib_absent=ib_absent,
        settings={name: tuple(values) for name, values in settings.items()},
        addresses=addresses,
        hosts=tuple(sorted({line.host for line in seen})),
    )
