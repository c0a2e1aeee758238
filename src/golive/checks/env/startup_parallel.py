"""The parallel layout the engine started with, and the ranks its workers took.

vLLM logs the layout in its engine-config line (`tensor_parallel_size=…`) and each worker its
place when it joins the process group (`world_size=2 rank=1 local_rank=1`). The layout must
be the declared one and fit the GPUs; the workers' ranks must agree with it: one world size,
each rank once, and no local rank beyond the GPUs of a node (a worker on device 3 of a
2-GPU node is a container that exposes other GPUs than the host evidence shows).

Ray's workers log under their node's address (`(RayWorkerWrapper pid=123, ip=10.0.0.2)`).
Where every host in the evidence names its address (`golive env --ray` keeps Ray's), each
worker is put on its node: its local rank must be below that node's own GPUs, and a worker
on an address no host has ran on a node the evidence does not cover (`no_data`: that node's
driver and GPUs were never seen, so nothing about it is approved). Where either side names
no address, a local rank is judged against the most GPUs any node shows, as before.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.startup_rules import NO_LOG
from golive.evidence.startup_log import StartupFacts
from golive.results import STARTUP_RESULT, CheckResult, Status

_RANK = re.compile(r"\bworld_size=(\d+) rank=(\d+) local_rank=(\d+)")
_PID = re.compile(r"\bpid=(\d+)")
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
class RankFindings:
    """What the workers' ranks say: what they contradict, the addresses no host has, and
    where each rank sits (rank, node, local rank) where the workers were put on nodes."""

    problems: tuple[str, ...] = ()
    unknown_ips: tuple[str, ...] = ()
    placed: tuple[tuple[int, str, int], ...] = ()


def worker_ranks(facts: StartupFacts) -> tuple[WorkerRank, ...]:
    """The rank each of this launch's workers joined with: its last rank line (vLLM logs one
    at DEBUG before the data-parallel adjustment and one at INFO after it), by the worker's
    `pid=` and `ip=` prefix; in log order."""
    lines = facts.text.splitlines()[facts.first_line - 1 : facts.last_line or None]
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
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return text


def node_addresses(inputs: ChainInputs) -> dict[str, NodeGpus] | None:
    """Each host's address and its node's GPUs, where every host in the evidence names a
    distinct address; None otherwise (a worker's `ip=` might then be a host without one)."""
    nodes = {
        _address(host.address): NodeGpus(host.node, len(host.gpus))
        for host, _ in inputs.hosts
        if host.address
    }
    return nodes if inputs.hosts and len(nodes) == len(inputs.hosts) else None


def placement(
    ranks: tuple[WorkerRank, ...], gpus_per_node: int | None, nodes: Mapping[str, NodeGpus] | None
) -> RankFindings:
    """Each worker's local rank against its node's GPUs: the node its `ip=` names where the
    hosts name addresses, else (and for workers without an `ip=`) the GPUs one node offers."""
    problems, unknown, placed = [], [], []
    pooled = []  # judged against the GPUs one node offers
    for r in ranks:
        node = None if nodes is None or r.ip is None else nodes.get(r.ip)
        if node is None:
            if nodes is not None and r.ip is not None and r.ip not in unknown:
                unknown.append(r.ip)
            pooled.append(r)
            continue
        placed.append((r.rank, node.node, r.local_rank))
        if node.gpus and r.local_rank >= node.gpus:
            problems.append(
                f"rank {r.rank} took local rank {r.local_rank} on node {node.node} (ip "
                f"{r.ip}, line {r.line}), which shows {node.gpus} GPU(s) in the host evidence"
            )
        else:  # a host that lists no GPU is judged by the GPUs one node offers, as before
            pooled.append(r)  # and the container's GPUs, where probed, bound every worker
    top = max((r.local_rank for r in pooled), default=None)
    if gpus_per_node is not None and top is not None and top >= gpus_per_node:
        problems.append(
            f"a worker took local rank {top} but the node shows {gpus_per_node} GPU(s): the "
            "container exposes other GPUs than the host evidence"
        )
    return RankFindings(tuple(problems), tuple(unknown), tuple(sorted(placed)))


def _gpus_per_node(inputs: ChainInputs) -> int | None:
    """The GPUs one node offers its workers: the container's (as torch sees them) where
    probed, else the most any host in the evidence has."""
    if inputs.container is not None and inputs.container.gpus:
        return len(inputs.container.gpus)
    counts = [len(host.gpus) for host, _ in inputs.hosts if host.gpus]
    return max(counts) if counts else None


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
    actual = facts.parallel()
    where = [f"{inputs.startup_path}#L{facts.engine_line or facts.args_line}"]
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
    if found.unknown_ips:
        where += [path for _, path in inputs.hosts]
    if problems:
        summary = "; ".join([*problems, *_uncovered(found, inputs)])
        return STARTUP_RESULT(
            "startup.parallel", Status.FAIL, summary, measurements, evidence=where
        )
    if found.unknown_ips:
        return STARTUP_RESULT(
            "startup.parallel",
            Status.NO_DATA,
            " ".join(_uncovered(found, inputs)),
            measurements,
            critical=True,  # a node nothing was collected from: its chain is unproven
            evidence=where,
        )
    layout = ", ".join(f"{k}={v}" for k, v in actual.items())
    return STARTUP_RESULT(
        "startup.parallel",
        Status.PASS,
        f"started with {layout}" + _by_node(found.placed),
        measurements,
        critical=critical,
        evidence=where,
    )


def _uncovered(found: RankFindings, inputs: ChainInputs) -> list[str]:
    """The workers' addresses no host in the evidence has, named with those it has."""
    if not found.unknown_ips:
        return []
    known = ", ".join(f"{h.node} {h.address}" for h, _ in inputs.hosts)
    return [
        f"worker(s) at ip {', '.join(found.unknown_ips)} ran on no node of the host evidence "
        f"({known}): give that node's host evidence (golive env --ray collects every node of "
        "the cluster), or the startup log of the cluster the evidence is from"
    ]


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
