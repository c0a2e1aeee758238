"""Ray job entrypoint: GPU memory on every alive node of the cluster while golive's pressure
phases run.

Submitted by `golive run --chain-ray ADDRESS` through the Jobs API, with golive shipped as a
runtime-env module (as `ray_nodes.py`). One sampler actor per node Ray schedules GPUs on (a
CPU-only node, such as a head without GPUs, is named, not sampled), pinned with
NodeAffinitySchedulingStrategy (soft=False), reads the node's GPU memory every `--interval`
seconds on its own thread (`golive.evidence.node_gpu`); every `--flush` seconds the driver
drains each and prints one line per node, `GOLIVE-GPU-CURVE <json>`, which golive reads back
from the job's logs. golive stops the job when its phases end: SIGTERM drains every sampler
once more before the driver exits. A node whose sampler cannot read is reported with the
reason on each line, never left out; `--max-s` bounds a job nobody stopped.

    python ray_gpu_curve.py --interval 0.5 --flush 2 --max-s 14400 --ready-s 120
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

MARKER = "GOLIVE-GPU-CURVE"


@ray.remote(num_cpus=0, max_restarts=0)
class _Sampler:
    def __init__(self, interval_s: float) -> None:
        self._rows: list[dict[str, Any]] = []
        self._error: str | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._loop, args=(interval_s,), daemon=True).start()

    def _loop(self, interval_s: float) -> None:
        while True:
            started = time.monotonic()
            try:
                from golive.evidence.node_gpu import read_gpu_memory

                row = {"wall_time": round(time.time(), 3), **read_gpu_memory()}
            except Exception as exc:
                with self._lock:
                    self._error = f"{type(exc).__name__}: {str(exc)[:300]}"
            else:
                with self._lock:
                    self._rows.append(row)
                    self._error = None
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    def ready(self) -> bool:
        return True

    def drain(self) -> dict[str, Any]:
        with self._lock:
            rows, self._rows = self._rows, []
            return {"rows": rows, "error": self._error}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--flush", type=float, default=2.0)
    parser.add_argument("--max-s", type=float, default=14400.0)
    parser.add_argument("--ready-s", type=float, default=120.0)
    args = parser.parse_args()
    ray.init()
    stop = threading.Event()  # after ray.init, which sets its own SIGTERM handler
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    alive = [n for n in ray.nodes() if n.get("Alive")]
    # the nodes Ray schedules GPUs on; a CPU-only node (a head without GPUs) is named, not
    # sampled
    nodes = [n for n in alive if (n.get("Resources") or {}).get("GPU", 0) > 0]
    samplers = [
        (
            node,
            _Sampler.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(args.interval),
        )
        for node in nodes
    ]
    # every sampler up (its node's runtime env set up) before golive's phases start
    waiting = {sampler.ready.remote(): node for node, sampler in samplers}
    deadline = time.monotonic() + args.ready_s
    while waiting and time.monotonic() < deadline:
        done, _ = ray.wait(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
        for ref in done:
            waiting.pop(ref)
    start = {
        "alive_nodes": len(alive),
        "gpu_nodes": len(nodes),
        "without_gpu": [_name(n) for n in alive if n not in nodes],
        "not_ready": [_name(n) for n in waiting.values()],
    }
    print(MARKER, json.dumps(start), flush=True)
    deadline = time.monotonic() + args.max_s
    while True:
        stopped = stop.wait(args.flush) or time.monotonic() > deadline
        _drain(samplers)
        if stopped:
            break


def _name(node: dict[str, Any]) -> str:
    return str(node.get("NodeManagerHostname") or node["NodeID"])


def _drain(samplers: list[tuple[dict[str, Any], Any]]) -> None:
    """Every sampler's new rows at once (Ray kills the driver 3 s after SIGTERM: one slow
    node must not cost the others their last rows); a sampler that does not answer in 2 s
    is a line with the reason."""
    asked = {sampler.drain.remote(): node for node, sampler in samplers}
    done, _ = ray.wait(list(asked), num_returns=len(asked), timeout=2.0)
    for ref, node in asked.items():
        try:
            got = ray.get(ref) if ref in done else {"rows": [], "error": "no answer in 2 s"}
        except Exception as exc:
            got = {"rows": [], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        line = {"node_id": node["NodeID"], "hostname": node.get("NodeManagerHostname", "")}
        print(MARKER, json.dumps({**line, **got}), flush=True)


if __name__ == "__main__":
    main()
