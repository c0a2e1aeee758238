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

    def start(self) -> None:
        """Submit the job and wait until its samplers run; a failure is kept as `problem`."""
        try:
            from ray.job_submission import JobStatus

            self._client = job_client(self.source.address, "--chain-ray")
            entrypoint = (
                f"python ray_gpu_curve.py --interval {self.interval_s:g} --flush {FLUSH_S:g}"
            )
            self.job_id = submit_script(
                self._client, entrypoint, "golive run --chain-ray (GPU memory)"
            )
            deadline = time.monotonic() + READY_S
            while MARKER not in self._client.get_job_logs(self.job_id):
                status = self._client.get_job_status(self.job_id)
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

    def stop(self) -> list[dict[str, Any]]:
        """Stop the job and return every line its samplers printed (empty where it never
        ran, `problem` saying why)."""
        if self.job_id is None or self._client is None:
            return []
        try:
            self._client.stop_job(self.job_id)
            deadline = time.monotonic() + STOP_S
            while not self._client.get_job_status(self.job_id).is_terminal():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            logs = self._client.get_job_logs(self.job_id)
        except Exception as exc:
            self.problem = f"the GPU memory sampler job {self.job_id} could not be read: {exc}"
            return []
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
    """Each node's rows as one CSV in `env collect --gpu-curve` columns (wall_time, then
    gpu<i>_used_mib and gpu<i>_total_mib by GPU index), named `ray-<node>`; a node that
    gave no row is a problem naming its sampler's last error."""
    nodes = [dict(line) for line in lines if isinstance(line.get("node_id"), str)]
    names = node_names(nodes)
    rows: dict[str, list[Mapping[str, Any]]] = {node_id: [] for node_id in names}
    errors: dict[str, str] = {}
    for line in nodes:
        got = line.get("rows")
        rows[line["node_id"]] += (
            [r for r in got if isinstance(r, Mapping)] if isinstance(got, list) else []
        )
        if line.get("error"):
            errors[line["node_id"]] = str(line["error"])
    out = NodeCurves()
    alive = next((line.get("alive_nodes") for line in lines if "alive_nodes" in line), None)
    if alive == 0:
        out.problems.append("the Ray cluster had no alive node to sample")
    for node_id, name in sorted(names.items(), key=lambda item: item[1]):
        if not rows[node_id]:
            why = errors.get(node_id, "no sample")
            out.problems.append(f"node {name}: no GPU memory sampled ({why})")
            continue
        out.curves.append((f"ray-{name}", _csv(rows[node_id])))
    return out


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
) -> AsyncIterator[NodeCurves]:
    """The Ray nodes' GPU memory sampled while the block runs; the yielded NodeCurves is
    filled when it ends (empty where no sampler was asked for). The job is stopped however
    the block ends."""
    found = NodeCurves()
    if sampler is None:
        yield found
        return
    say(f"GPU memory: starting a sampler on every node of the Ray cluster {sampler.source.address}")
    await asyncio.to_thread(sampler.start)
    try:
        yield found
    finally:
        lines = await asyncio.to_thread(sampler.stop)
        for line in lines:
            bundle.append_jsonl(RAY_GPU_CURVE, line)
        got = node_curves(lines)
        found.curves += got.curves
        found.problems += ([sampler.problem] if sampler.problem else []) + got.problems
