"""The parallel layout the engine started with, and the ranks its workers took.

vLLM logs the layout in its engine-config line (`tensor_parallel_size=…`) and each worker its
place when it joins the process group (`world_size=2 rank=1 local_rank=1`). The layout must
be the declared one and fit the GPUs; the workers' ranks must agree with it: one world size,
each rank once, and no local rank beyond the GPUs of a node (a worker on device 3 of a
2-GPU node is a container that exposes other GPUs than the host evidence shows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
            key = " ".join(m[0] for m in (_PID.search(prefix), _IP.search(prefix)) if m)
            found.pop(key, None)
            found[key] = WorkerRank(world, rank, local, number)
    return tuple(found.values())


def rank_problems(
    ranks: tuple[WorkerRank, ...], sizes: dict[str, int], gpus_per_node: int | None
) -> list[str]:
    """What the workers' ranks contradict: the layout's world size, each other, the GPUs."""
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
    top = max(r.local_rank for r in ranks)
    if gpus_per_node is not None and top >= gpus_per_node:
        problems.append(
            f"a worker took local rank {top} but the node shows {gpus_per_node} GPU(s): the "
            "container exposes other GPUs than the host evidence"
        )
    return problems


def _gpus_per_node(inputs: ChainInputs) -> int | None:
    """The GPUs one node offers its workers: the container's (as torch sees them) where
    probed, else the most any host in the evidence has."""
    if inputs.container is not None and inputs.container.gpus:
        return len(inputs.container.gpus)
    counts = [len(host.gpus) for host, _ in inputs.hosts if host.gpus]
    return max(counts) if counts else None


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
    wrong_ranks = rank_problems(ranks, actual, _gpus_per_node(inputs))
    if wrong_ranks:  # named only when wrong: a pass reads as it did in bundles sealed before
        problems += wrong_ranks
        measurements["ranks_seen"] = len({r.rank for r in ranks})
        measurements["max_local_rank"] = max(r.local_rank for r in ranks)
        where.append(f"{inputs.startup_path}#L{ranks[0].line}")
    if problems:
        return STARTUP_RESULT(
            "startup.parallel", Status.FAIL, "; ".join(problems), measurements, evidence=where
        )
    layout = ", ".join(f"{k}={v}" for k, v in actual.items())
    return STARTUP_RESULT(
        "startup.parallel",
        Status.PASS,
        f"started with {layout}",
        measurements,
        critical=critical,
        evidence=where,
    )
