"""Samplers for memory curves and engine state: host RSS of the target's process tree (when
local), GPU memory through NVML (when golive runs on the GPU host), and the engine's own
gauges from /metrics. Each runs as a bounded background task writing CSV rows as it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from golive.bundle.store import Bundle
from golive.evidence.collect import nvml_gpu

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MIB = 1024 * 1024
Probe = Callable[[], Awaitable[Mapping[str, float | None]]]


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants, read from /proc (Linux)."""
    seen, stack = [], [pid]
    while stack:
        current = stack.pop()
        seen.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                stack.extend(int(child) for child in task.read_text().split())
    return seen


def tree_rss_mib(pid: int, members: list[int] | None = None) -> float | None:
    """Resident memory of a process and its descendants, in MiB; None if it is gone.

    `members` is the tree when the caller already knows it (walking a vLLM tree's threads
    costs ~5 ms; reading the members' statm ~0.1 ms)."""
    total = 0
    alive = False
    for member in members if members is not None else process_tree(pid):
        try:
            resident = int(Path(f"/proc/{member}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        alive = True
        total += resident * PAGE
    return total / MIB if alive else None


TREE_REFRESH_S = 2.0


def host_probe(pid: int) -> Probe:
    """RSS of the server's process tree; the tree itself is re-read every 2 s."""
    tree: dict[str, Any] = {"members": None, "at": 0.0}

    def sample() -> float | None:
        now = time.monotonic()
        if tree["members"] is None or now - tree["at"] >= TREE_REFRESH_S:
            tree["members"], tree["at"] = process_tree(pid), now
        return tree_rss_mib(pid, tree["members"])

    async def probe() -> Mapping[str, float | None]:
        return {"host_rss_mib": await asyncio.to_thread(sample)}

    return probe


def nvml_probe() -> Probe | None:
    """GPU memory used per device, or None when NVML cannot be used here."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return None

    async def probe() -> Mapping[str, float | None]:
        values: dict[str, float | None] = {}
        for index, handle in enumerate(handles):
            try:
                info = pynvml.nvmlDeviceGetMemoryInfo(handle)
                values[f"gpu{index}_used_mib"] = info.used / MIB
                values[f"gpu{index}_total_mib"] = info.total // MIB  # beside memory/gpus.json
            except pynvml.NVMLError:
                values[f"gpu{index}_used_mib"] = None
                values[f"gpu{index}_total_mib"] = None
        return values

    return probe


def nvml_inventory() -> list[dict[str, Any]]:
    """Each GPU NVML sees here: index, name, UUID and memory total (`memory/gpus.json`, what
    `capacity.memory` holds the curve's use against), read as `golive env collect --host`
    reads them; empty when NVML cannot be used."""
    try:
        import pynvml

        pynvml.nvmlInit()
        gpus = [nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return []
    return [g.model_dump(include={"index", "name", "uuid", "memory_total_mib"}) for g in gpus]


@dataclass
class Curve:
    """Rows sampled so far (t is seconds since the sampler started)."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def series(self, column: str) -> list[tuple[float, float]]:
        return [(r["t_s"], r[column]) for r in self.rows if r.get(column) is not None]

    def peak(self, column: str) -> float | None:
        values = [v for _, v in self.series(column)]
        return max(values) if values else None

    def csv_line(self, row: Mapping[str, Any]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer).writerow(["" if row.get(c) is None else row[c] for c in self.columns])
        return buffer.getvalue()


@contextlib.asynccontextmanager
async def sampling(
    bundle: Bundle, rel: str, probes: list[Probe], interval_s: float, phase: Callable[[], str]
) -> AsyncIterator[Curve]:
    """Sample every `interval_s` until the block ends; each row is appended to `rel` (CSV)
    as it is taken, so a killed run keeps its curve."""
    curve = Curve()
    start = time.monotonic()

    async def loop() -> None:
        while True:
            row: dict[str, Any] = {"t_s": round(time.monotonic() - start, 3), "phase": phase()}
            for probe in probes:
                with contextlib.suppress(Exception):
                    row.update(await probe())
            if not curve.columns:
                curve.columns = list(row)
                bundle.append_text(rel, ",".join(curve.columns) + "\n")
            curve.rows.append(row)
            bundle.append_text(rel, curve.csv_line(row))
            await asyncio.sleep(interval_s)

    async with running_beside(loop()):
        yield curve


@contextlib.asynccontextmanager
async def running_beside(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run `work` (a loop) as a task beside the block; cancel it, and wait for it, when the
    block ends however it ends."""
    task = asyncio.ensure_future(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
