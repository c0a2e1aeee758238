"""The parallel layout the engine started with, and the ranks its workers took.

vLLM logs the layout in its engine-config line (`tensor_parallel_size=…`) and each worker its
place when it joins the process group (`world_size=2 rank=1 local_rank=1`). The layout must
be the declared one and fit the GPUs; the workers' ranks must agree with it: one world size,
each rank once, and no local rank beyond the GPUs of a node (a worker on device 3 of a
2-GPU node is a container that exposes other GPUs than the host evidence shows).

Ray's workers log under their node's address (`(RayWorkerWrapper pid=123, ip=10.0.0.2)`);
`golive env --ray` keeps each host's address. Where the workers name an `ip=` and at least
one host names an address, the workers are put on nodes by this rule:

- a worker at an address exactly one host names is placed on that host: its local rank must
  be below that node's own GPUs, and a node whose host evidence lists no GPU is `no_data`
  (its GPUs were never seen, so nothing about them is approved);
- a worker at an address two or more hosts name is placed on none of them;
- the worker addresses no host names are the unknown ones. If there are more of them
  (distinct) than hosts naming no address, they ran on nodes the evidence does not cover:
  `no_data`, critical (that node's driver and GPUs were never seen). If there are at most
  as many, the hosts without an address could be them: they are placed on none, but their
  local ranks are bounded by the GPUs of those hosts, and the summary says so.

So removing or duplicating one host's address never places a worker it did not place before,
and it hides an unknown node only where a host without an address could honestly be it.
Where no host names an address or no worker names an `ip=` (captures made before hosts had
addresses), a local rank is judged against the most GPUs any node shows, as before. The
container's GPUs, where probed, bound every worker. A number too long to be a rank (over nine
digits) is not read: such a line is not a rank line.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.startup_rules import NO_LOG
from golive.evidence.startup_log import PARALLEL_KEYS, StartupFacts, parallel_count
from golive.results import STARTUP_RESULT, CheckResult, Status

_RANK = re.compile(r"\bworld_size=(\d{1,9}) rank=(\d{1,9}) local_rank=(\d{1,9})\b", re.ASCII)
_PID = re.compile(r"\bpid=(\d{1,9})\b", re.ASCII)
_IP = re.compile(r"\bip=([0-9a-fA-F.:]+)")


@dataclass(frozen=True, slots=True)
class WorkerRank:
    world_size: int
    rank: int
    local_rank: int
    line: int
    ip: str | None = None  # the `ip=` of a Ray worker's prefix: its node's address


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """A node of the host evidence a worker's `ip=` names: its name and its GPUs."""

    node: str
    gpus: int


@dataclass(frozen=True, slots=True)
class NodeMap:
    """What the hosts' addresses say: the addresses exactly one host names (a worker there is
    put on it), those two or more name (a worker there is put on none), and the hosts that
    name none (a worker at an address no host names might be one of them)."""

    nodes: Mapping[str, NodeGpus]
    shared: frozenset[str] = frozenset()
    unaddressed: tuple[NodeGpus, ...] = ()


@dataclass(frozen=True, slots=True)
class RankFindings:
    """What the workers' ranks say: what they contradict, the addresses no host has, the
    nodes whose GPUs were never seen, the addresses taken to be hosts without one, and where
    each rank sits (rank, node, local rank) where the workers were put on nodes."""

    problems: tuple[str, ...] = ()
    unknown_ips: tuple[str, ...] = ()
    placed: tuple[tuple[int, str, int], ...] = ()
    unseen_gpus: tuple[str, ...] = ()  # "rank 0 on node head (ip 10.0.0.1)"
    assumed_ips: tuple[str, ...] = ()  # on a host without an address, placed on none


def worker_ranks(facts: StartupFacts) -> tuple[WorkerRank, ...]:
    """The rank each of this launch's workers joined with: its last rank line (vLLM logs one
    at DEBUG before the data-parallel adjustment and one at INFO after it), by the worker's
    `pid=` and `ip=` prefix; in log order."""
    lines = facts.launch_lines()
    found: dict[str, WorkerRank] = {}
    for number, line in enumerate(lines, start=facts.first_line):
        match = _RANK.search(line)
        if match is not None:
            world, rank, local = (int(g) for g in match.groups())
            # a worker is its pid on its node (pids repeat across nodes and containers);
            # unprefixed lines come from the one in-process worker
            prefix = line[: match.start()]
            pid, ip = _PID.search(prefix), _IP.search(prefix)
            key = " ".join(m[0] for m in (pid, ip) if m)
            found.pop(key, None)
            found[key] = WorkerRank(world, rank, local, number, _address(ip[1]) if ip else None)
    return tuple(found.values())


def rank_problems(ranks: tuple[WorkerRank, ...], sizes: dict[str, int]) -> list[str]:
    """What the workers' ranks contradict: the layout's world size, each other."""
    if not ranks:
        return []
    problems = []
    worlds = sorted({r.world_size for r in ranks})
    engine = sizes["tp"] * sizes["pp"]
    allowed = {engine, engine * sizes["dp"]}  # with data parallel, ranks span every DP engine
    if len(worlds) > 1:
        problems.append(f"the workers disagree on the world size: {worlds}")
    elif worlds[0] not in allowed:
        problems.append(
            f"the workers joined a world of {worlds[0]} rank(s) but tp*pp = {engine}"
            + (f" (x dp {sizes['dp']} = {engine * sizes['dp']})" if sizes["dp"] > 1 else "")
        )
    # data-parallel engines that are not one process group each count their own ranks
    one_group = sizes["dp"] == 1 or worlds[-1] == engine * sizes["dp"]
    seen: dict[int, int] = {}
    for r in ranks:
        if r.rank in seen and one_group:
            problems.append(f"rank {r.rank} joined twice (lines {seen[r.rank]} and {r.line})")
        seen.setdefault(r.rank, r.line)
        if r.rank >= r.world_size:
            problems.append(f"rank {r.rank} is outside its world of {r.world_size} (line {r.line})")
    return problems


def _address(text: str) -> str:
    """An address as one spelling (`::1` and `0:0::1` are one node)."""
    try:
        return ipaddress.ip_address(text.strip()).compressed
    except ValueError:
        return text.strip()


def node_addresses(inputs: ChainInputs) -> NodeMap | None:
    """The hosts by address (see the module's rule); None where no host names one."""
    named: dict[str, list[NodeGpus]] = {}
    unaddressed = []
    for host, _ in inputs.hosts:
        node = NodeGpus(host.node, len(host.gpus))
        address = _address(host.address) if host.address else ""
        if address:
            named.setdefault(address, []).append(node)
        else:
            unaddressed.append(node)
    if not named:
        return None
    return NodeMap(
        nodes={address: hosts[0] for address, hosts in named.items() if len(hosts) == 1},
        shared=frozenset(address for address, hosts in named.items() if len(hosts) > 1),
        unaddressed=tuple(unaddressed),
    )


def placement(
    ranks: tuple[WorkerRank, ...], gpus_per_node: int | None, nodes: NodeMap | None
) -> RankFindings:
    """Each worker's local rank against its node's GPUs by the module's rule: the node its
    `ip=` names where one host names that address, else the GPUs one node offers."""
    problems, strays, placed, unseen, beyond = [], [], [], [], []
    for r in ranks:
        if nodes is None or r.ip is None or r.ip in nodes.shared:
            continue
        node = nodes.nodes.get(r.ip)
        if node is None:
            strays.append(r)
            continue
        placed.append((r.rank, node.node, r.local_rank))
        where = f"node {node.node} (ip {r.ip}, line {r.line})"
        if not node.gpus:
            unseen.append(f"rank {r.rank} on {where}")
        elif r.local_rank >= node.gpus:
            beyond.append(r)
            problems.append(
                f"rank {r.rank} took local rank {r.local_rank} on {where}, which shows "
                f"{node.gpus} GPU(s) in the host evidence"
            )
    stray_ips = tuple(dict.fromkeys(r.ip for r in strays if r.ip))
    covered = nodes is not None and len(stray_ips) <= len(nodes.unaddressed)
    if covered and strays and nodes is not None:
        over, found = _on_unaddressed(strays, nodes.unaddressed)
        beyond += over
        problems += found
    # the most GPUs one node offers (and the container's, where probed) bound every worker
    top = max((r.local_rank for r in ranks if r not in beyond), default=None)
    if gpus_per_node is not None and top is not None and top >= gpus_per_node:
        problems.append(
            f"a worker took local rank {top} but the node shows {gpus_per_node} GPU(s): the "
            "container exposes other GPUs than the host evidence"
        )
    return RankFindings(
        tuple(problems),
        () if covered else stray_ips,
        tuple(sorted(placed)),
        tuple(unseen),
        stray_ips if covered else (),
    )


def _on_unaddressed(
    strays: list[WorkerRank], hosts: tuple[NodeGpus, ...]
) -> tuple[list[WorkerRank], list[str]]:
    """Workers at addresses no host names, which only the hosts without an address can be:
    those at a local rank beyond the most GPUs any of those hosts shows, and the finding."""
    bound = max(host.gpus for host in hosts)
    top = max(strays, key=lambda r: r.local_rank)
    if not bound or top.local_rank < bound:
        return [], []
    names = ", ".join(host.node for host in hosts)
    return [r for r in strays if r.local_rank >= bound], [
        f"rank {top.rank} (ip {top.ip}, line {top.line}) took local rank {top.local_rank}, "
        f"but no host names that address and the hosts without one ({names}) show at most "
        f"{bound} GPU(s)"
    ]


def _gpus_per_node(inputs: ChainInputs) -> int | None:
    """The GPUs one node offers its workers: the container's (as torch sees them) where
    probed, else the most any host in the evidence has."""
    if inputs.container is not None and inputs.container.gpus:
        return len(inputs.container.gpus)
    return inputs.most_node_gpus()


def rank_findings(
    inputs: ChainInputs, ranks: tuple[WorkerRank, ...], sizes: dict[str, int]
) -> RankFindings:
    """The workers' ranks against the layout, each other and their nodes' GPUs."""
    if not ranks:
        return RankFindings()
    found = placement(ranks, _gpus_per_node(inputs), node_addresses(inputs))
    return replace(found, problems=(*rank_problems(ranks, sizes), *found.problems))


def check_parallel(inputs: ChainInputs) -> CheckResult:
    """The parallel layout the engine started with equals the declared one and fits the GPUs,
    and the ranks its workers joined with agree with it."""
    declared = inputs.declared_parallel
    facts = inputs.startup
    critical = declared is not None
    if facts is None:
        return STARTUP_RESULT("startup.parallel", Status.NO_DATA, NO_LOG, critical=critical)
    if facts.args_line is None and facts.engine_line is None:
        return STARTUP_RESULT(
            "startup.parallel",
            Status.NO_DATA,
            "the startup log has neither the `non-default args:` nor the engine-config line, "
            "so the parallel layout is unknown: give the first complete initialization log",
            critical=critical,
            evidence=[inputs.startup_path],
        )
    where = [f"{inputs.startup_path}#L{facts.engine_line or facts.args_line}"]
    unread = [
        f"{key}={str(facts.arg(key))[:12]!r}"
        for key in PARALLEL_KEYS
        if facts.arg(key) is not None and parallel_count(facts.arg(key)) is None
    ]
    if unread:
        return STARTUP_RESULT(
            "startup.parallel",
            Status.NO_DATA,
            f"the startup log prints {', '.join(unread)}, which is no count, so the "
            "parallel layout is unknown: give the first complete initialization log",
            critical=critical,
            evidence=where,
        )
    actual = facts.parallel()
    measurements: dict[str, float | int | str | bool | None] = dict(actual)
    problems = []
    if declared is not None:
        wanted = declared.model_dump()
        differ = [
            f"{k}={actual[k]} (declared {wanted[k]})"
            for k in ("tp", "pp", "dp", "ep")
            if actual[k] != wanted[k]
        ]
        if differ:
            problems.append(
                "the engine did not start with the declared layout: " + ", ".join(differ)
            )
    gpu_count = sum(len(host.gpus) for host, _ in inputs.hosts)
    world = actual["tp"] * actual["pp"] * actual["dp"]
    measurements["world_size"] = world
    if inputs.hosts and world > gpu_count:
        problems.append(
            f"tp*pp*dp = {world} ranks but only {gpu_count} GPU(s) in the host evidence"
        )
    ranks = worker_ranks(facts)
    found = rank_findings(inputs, ranks, actual)
    if found.placed:  # only where workers were put on nodes: bundles sealed before read alike
        measurements["rank_map"] = " ".join(f"{r}={n}:{lr}" for r, n, lr in found.placed)
    if found.problems:  # named only when wrong: a pass reads as it did in bundles sealed before
        problems += found.problems
        measurements["ranks_seen"] = len({r.rank for r in ranks})
        measurements["max_local_rank"] = max(r.local_rank for r in ranks)
        where.append(f"{inputs.startup_path}#L{ranks[0].line}")
    unproven = _uncovered(found, inputs)
    if unproven:
        where += [path for _, path in inputs.hosts]
    if problems:
        summary = "; ".join([*problems, *unproven])
        return STARTUP_RESULT(
            "startup.parallel", Status.FAIL, summary, measurements, evidence=where
        )
    if unproven:
        return STARTUP_RESULT(
            "startup.parallel",
            Status.NO_DATA,
            " ".join(unproven),
            measurements,
            critical=True,  # a node whose GPUs were never seen: its chain is unproven
            evidence=where,
        )
    layout = ", ".join(f"{k}={v}" for k, v in actual.items())
    return STARTUP_RESULT(
        "startup.parallel",
        Status.PASS,
        f"started with {layout}" + _by_node(found.placed) + _assumed(found, inputs),
        measurements,
        critical=critical,
        evidence=where,
    )


def _uncovered(found: RankFindings, inputs: ChainInputs) -> list[str]:
    """The workers' addresses no host in the evidence has, named with those it has, and the
    workers on nodes whose host evidence lists no GPU."""
    said = []
    if found.unknown_ips:
        known = ", ".join(f"{h.node} {h.address or '(no address)'}" for h, _ in inputs.hosts)
        said.append(
            f"worker(s) at ip {', '.join(found.unknown_ips)} ran on no node of the host "
            f"evidence ({known}): give that node's host evidence (golive env --ray collects "
            "every node of the cluster), or the startup log of the cluster the evidence is from"
        )
    if found.unseen_gpus:
        said.append(
            f"{', '.join(found.unseen_gpus)}: the host evidence of that node lists no GPU, so "
            "its GPUs were never seen; give that node's host evidence with its GPUs"
        )
    return said


def _assumed(found: RankFindings, inputs: ChainInputs) -> str:
    """`; worker(s) at ip … are taken to be on …` where hosts without an address could be
    the workers' nodes (placed on none), else nothing."""
    if not found.assumed_ips:
        return ""
    hosts = ", ".join(h.node for h, _ in inputs.hosts if not (h.address or "").strip())
    return (
        f"; worker(s) at ip {', '.join(found.assumed_ips)}, an address no host names, are "
        f"taken to be on the host(s) without one ({hosts})"
    )


def _by_node(placed: tuple[tuple[int, str, int], ...]) -> str:
    """`; ranks by node: a 0, b 1` where workers were put on nodes, else nothing."""
    if not placed:
        return ""
    nodes: dict[str, list[int]] = {}
    for rank, node, _ in placed:
        nodes.setdefault(node, []).append(rank)
    return "; ranks by node: " + ", ".join(
        f"{node} {' '.join(map(str, ranks))}" for node, ranks in sorted(nodes.items())
    )
