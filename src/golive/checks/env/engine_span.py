"""Whether the engine of the serving launch spans nodes, and how that is known.

A deployment can have several GPU nodes whose engines each fit one (TP=1 or TP=2 replicas
behind a router): the number of host files says nothing of one engine. What does, from the
engine itself:

- NCCL's own `nNodes` on a communicator line, or NCCL lines printed by two or more hosts;
- vLLM's Ray workers of the launch logging under two or more node addresses (`ip=`);
- the layout it started with (tp*pp*dp) needing more GPUs than the most one node shows in
  the host evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.startup_parallel import worker_ranks
from golive.checks.env.startup_rules import other_launch
from golive.evidence.nccl_log import NcclFacts


@dataclass(frozen=True, slots=True)
class EngineSpan:
    """The nodes the engine provably spans (1: not shown to span more), and the evidence."""

    nodes: int
    why: str = ""


def _serving(inputs: ChainInputs) -> bool:
    return inputs.startup is not None and not other_launch(inputs)


def engine_world(inputs: ChainInputs) -> int:
    """The ranks tp*pp*dp the serving launch started with; 0 where no log of it says."""
    facts = inputs.startup
    if facts is None or not _serving(inputs):
        return 0
    if facts.args_line is None and facts.engine_line is None:
        return 0
    layout = facts.parallel()
    return layout["tp"] * layout["pp"] * layout["dp"]


def _worker_nodes(inputs: ChainInputs) -> tuple[str, ...]:
    """The distinct node addresses the launch's Ray workers logged their rank under."""
    if inputs.startup is None or not _serving(inputs):
        return ()
    return tuple(sorted({r.ip for r in worker_ranks(inputs.startup) if r.ip}))


def _listed(names: tuple[str, ...]) -> str:
    shown = ", ".join(n[:64] for n in names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def engine_span(inputs: ChainInputs, nccl: NcclFacts) -> EngineSpan:
    """The most nodes any of the engine's own evidence shows it on, with that evidence."""
    found = [EngineSpan(1)]
    if nccl.comm is not None and nccl.comm.nodes >= 2:
        n = nccl.comm.nodes
        found.append(EngineSpan(n, f"NCCL's nNodes {n}, line {nccl.comm.line.line}"))
    if len(nccl.hosts) >= 2:
        found.append(
            EngineSpan(len(nccl.hosts), f"NCCL's lines come from hosts {_listed(nccl.hosts)}")
        )
    ips = _worker_nodes(inputs)
    if len(ips) >= 2:
        found.append(EngineSpan(len(ips), f"its Ray workers ran at ip {_listed(ips)}"))
    world = engine_world(inputs)
    most = inputs.most_node_gpus()
    if most and world > most:
        found.append(
            EngineSpan(
                -(-world // most),
                f"tp*pp*dp = {world} ranks, more than the {most} GPU(s) one node shows",
            )
        )
    return max(found, key=lambda s: s.nodes)  # the first of the widest
