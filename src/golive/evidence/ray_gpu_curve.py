"""GPU memory sampled on every node of the vLLM Ray cluster while the pressure phases run
(`golive run --chain-ray ADDRESS`): no sampler started by hand on each node, no CSV copied
back (issue 30 §4).

Before the phases golive submits `scripts/ray_gpu_curve.py` as a Ray job (the same Jobs API
path as the chain's node collection) and waits for its samplers to start; after them it stops
the job and reads every node's rows back from the job's logs. The lines are kept as
`memory/ray-gpu-curve.jsonl`; each node's rows become one curve (`ray-<node>`) merged by phase
into `capacity.gpu_memory`, as a `--gpu-curve` file is. A node whose sampler could not read
(no NVML and no nvidia-smi, a lost actor) is named with the reason, never left out; a job
that never started is `no_data` on `capacity.gpu_memory`, never the capacity section's cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from golive.bundle.layout import RAY_GPU_CURVE
from golive.bundle.store import Bundle
from golive.evidence.ray_env import RaySource, job_client, node_names, submit_script

MARKER = "GOLIVE-GPU-CURVE"
READY_S = 300.0  # runtime-env setup, the job's start and one sampler per node
STOP_S = 30.0
FLUSH_S = 2.0  # the driver prints each node's new rows this often
_GPU = re.compile(r"^gpu(\d+)_")


@dataclass
class NodeCurves:
    """What the Ray nodes' samplers gave: one CSV per node, the problems met."""

    curves: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class RayGpuCurves:
    """The sampling job: started before the pressure phases, stopped after them (blocking
    calls: run them in a thread)."""

    def __init__(self, source: RaySource, interval_s: float = 0.5) -> None:
        self.source = source
        self.interval_s = interval_s
        self.job_id: str | None = None
        self.problem: str | None = None
        self._client: Any = None
        self._cancel = threading.Event()  # golive stops before the samplers are up
        self._started = threading.Event()  # start() has returned

    def start(self) -> None:
        """Submit the job and wait until its samplers run; a failure is kept as `problem`."""
        try:
            from ray.job_submission import JobStatus

            self._client = job_client(self.source.address, "--chain-ray")
            entrypoint = (
                f"python ray_gpu_curve.py --interval {self.interval_s:g} --flush {FLUSH_S:g}"
            )
            self.job_id = submit_script(self._client, entrypoint, "golive --chain-ray (GPU memory)")
            deadline = time.monotonic() + READY_S
            while MARKER not in self._client.get_job_logs(self.job_id):
                status = self._client.get_job_status(self.job_id)
                if self._cancel.is_set():
                    return
                if status.is_terminal() or time.monotonic() > deadline:
                    ended = "" if status != JobStatus.RUNNING else " (still setting up)"
                    self.problem = (
                        f"the GPU memory sampler job {self.job_id} did not start its samplers "
                        f"(status {status.value}{ended})"
                    )
                    return
                time.sleep(0.5)
        except Exception as exc:
            self.problem = f"the GPU memory sampler job could not start: {exc}"
        finally:
            self._started.set()

    def stop(self) -> list[dict[str, Any]]:
        """Stop the job (once start() has returned: a job submitted as golive stops is not
        left running) and return every line its samplers printed; a job that ended other
        than stopped by golive is a `problem`."""
        self._cancel.set()
        self._started.wait(STOP_S)
        if self.job_id is None or self._client is None:
            return []
        try:
            self._client.stop_job(self.job_id)
            deadline = time.monotonic() + STOP_S
            status = self._client.get_job_status(self.job_id)
            while not status.is_terminal() and time.monotonic() < deadline:
                time.sleep(0.5)
                status = self._client.get_job_status(self.job_id)
            logs = self._client.get_job_logs(self.job_id)
        except Exception as exc:
            self.problem = f"the GPU memory sampler job {self.job_id} could not be read: {exc}"
            return []
        if status.value not in ("STOPPED", "SUCCEEDED"):
            tail = " | ".join(logs.strip().splitlines()[-3:])[-300:]
            self.problem = (
                f"the GPU memory sampler job {self.job_id} ended {status.value} before golive "
                f"stopped it: its curves may end early ({tail})"
            )
        return sampler_lines(logs)


def sampler_lines(logs: str) -> list[dict[str, Any]]:
    """The job's result lines (`GOLIVE-GPU-CURVE <json>`), in order; others are Ray's."""
    out = []
    for line in logs.splitlines():
        if line.startswith(MARKER + " "):
            with contextlib.suppress(ValueError):
                row = json.loads(line.removeprefix(MARKER))
                if isinstance(row, dict):
                    out.append(row)
    return out


def node_curves(lines: Sequence[Mapping[str, Any]]) -> NodeCurves:
    """Each GPU node's rows as one CSV in `env collect --gpu-curve` columns (wall_time, then
    gpu<i>_used_mib and gpu<i>_total_mib by GPU index), named `ray-<node>`. A problem for
    each GPU node that gave no row, whose last read failed, or that never reported, and
    for a cluster with no GPU node; a row without a numeric time is left out, named."""
    start = next((line for line in lines if "alive_nodes" in line), {})
    nodes = [
        {**line, "hostname": str(line.get("hostname") or "")}
        for line in lines
        if isinstance(line.get("node_id"), str)
    ]
    names = node_names(nodes)
    rows: dict[str, list[Mapping[str, Any]]] = {node_id: [] for node_id in names}
    last_error: dict[str, str | None] = {}
    odd = 0
    for line in nodes:
        got = line.get("rows")
        for row in got if isinstance(got, list) else []:
            if isinstance(row, Mapping) and _number(row.get("wall_time")):
                rows[line["node_id"]].append(row)
            else:
                odd += 1
        last_error[line["node_id"]] = None if not line.get("error") else str(line["error"])
    out = NodeCurves()
    if start.get("gpu_nodes") == 0:
        out.problems.append("no node of the Ray cluster offers a GPU (Ray's GPU resource)")
    elif isinstance(start.get("gpu_nodes"), int) and len(names) < start["gpu_nodes"]:
        out.problems.append(
            f"{start['gpu_nodes'] - len(names)} of the cluster's {start['gpu_nodes']} GPU "
            "node(s) never reported"
        )
    if odd:
        out.problems.append(f"{odd} sampled row(s) without a time were left out")
    for node_id, name in sorted(names.items(), key=lambda item: item[1]):
        error = last_error.get(node_id)
        if not rows[node_id]:
            out.problems.append(f"node {name}: no GPU memory sampled ({error or 'no sample'})")
            continue
        if error is not None:
            out.problems.append(f"node {name}: its last GPU memory read failed ({error})")
        out.curves.append((f"ray-{name}", _csv(rows[node_id])))
    return out


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    columns = sorted(
        {key for row in rows for key in row if _GPU.match(key)},
        key=lambda key: (int(_GPU.match(key).group(1)), key),  # type: ignore[union-attr]
    )
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["wall_time", *columns], extrasaction="ignore")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: float(r.get("wall_time") or 0.0)):
        writer.writerow(row)
    return text.getvalue()


@contextlib.asynccontextmanager
async def ray_gpu_sampling(
    sampler: RayGpuCurves | None, bundle: Bundle, say: Callable[[str], None]
) -> AsyncIterator[list[str]]:
    """The Ray nodes' GPU memory sampled while the block runs, its lines appended to the
    bundle; the yielded list holds, when it ends, the job's own problem (none where no
    sampler was asked for: the nodes' curves are read back from the lines,
    `checks/capacity/node_curves.py`). The job is stopped however the block ends, a Ctrl-C
    while the samplers start included."""
    problems: list[str] = []
    if sampler is None:
        yield problems
        return
    try:
        say(f"GPU memory: a sampler on every GPU node of the Ray cluster {sampler.source.address}")
        await asyncio.to_thread(sampler.start)
        yield problems
    finally:
        try:
            lines = await asyncio.wait_for(asyncio.to_thread(sampler.stop), STOP_S * 3)
        except TimeoutError:
            lines = []
            sampler.problem = f"the Ray Jobs API did not answer within {STOP_S * 3:g} s"
        for line in lines:
            bundle.append_jsonl(RAY_GPU_CURVE, line)
        problems += [sampler.problem] if sampler.problem else []  # what the lines cannot show
