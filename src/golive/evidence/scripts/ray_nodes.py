"""Ray job entrypoint: `golive env collect --host` once on every alive node of the cluster.

Submitted by `golive env --ray ADDRESS` through the Jobs API, with golive shipped as a
runtime-env module, so the cluster's own Ray and Python run it. Each node's task is pinned
with NodeAffinitySchedulingStrategy (soft=False); a node whose task fails or does not answer
within the timeout is reported with the reason, never left out. Each report names its node
as Ray does: its id, hostname and address (`NodeManagerAddress`, the `ip=` vLLM's Ray workers
log under). The result is printed as one line, `GOLIVE-RAY-NODES <json>`, which golive reads
back from the job's logs.

    python ray_nodes.py --timeout 120 [--container]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

MARKER = "GOLIVE-RAY-NODES"


def node_identity(node: dict[str, Any]) -> dict[str, Any]:
    """A node as `ray.nodes()` names it: its id, hostname and address (None where Ray gives
    none)."""
    return {
        "node_id": node["NodeID"],
        "hostname": node.get("NodeManagerHostname", ""),
        "address": node.get("NodeManagerAddress") or None,
    }


@ray.remote(num_cpus=0, max_retries=0)
def _collect(identity: dict[str, Any], container: bool) -> dict[str, Any]:
    from golive.evidence.collect import collect_container, collect_host

    report: dict[str, Any] = {
        **identity,
        "host": collect_host(identity["hostname"]).model_dump(mode="json"),
    }
    if container:
        try:
            report["container"] = collect_container(shlex.quote(sys.executable)).model_dump(
                mode="json"
            )
        except Exception as exc:
            report["container_error"] = f"{type(exc).__name__}: {exc}"
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--container", action="store_true")
    args = parser.parse_args()
    ray.init()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    pending = {}
    for node in nodes:
        ref = _collect.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(node_identity(node), args.container)
        pending[ref] = node
    reports = []
    deadline = time.monotonic() + args.timeout
    while pending:
        left = deadline - time.monotonic()
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, left))
        if not ready:
            break
        for ref in ready:
            node = pending.pop(ref)
            try:
                reports.append(ray.get(ref))
            except Exception as exc:
                reports.append(_failed(node, f"{type(exc).__name__}: {str(exc)[:300]}"))
    for node in pending.values():
        reports.append(_failed(node, f"no answer within {args.timeout:g} s"))
    print(MARKER, json.dumps({"alive_nodes": len(nodes), "nodes": reports}), flush=True)


def _failed(node: dict[str, Any], error: str) -> dict[str, Any]:
    return {**node_identity(node), "error": error}


if __name__ == "__main__":
    main()
