"""A standalone GPU memory sampler for each node (`golive env collect --gpu-curve`) and the
merge of its CSV into a capacity bundle by wall-clock time, phase by phase."""

from __future__ import annotations

import asyncio
import csv
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from golive.errors import ConfigError, EvidenceError
from golive.evidence.sampling import nvml_probe


async def record_gpu_curve(out: Path, duration_s: float, interval_s: float = 0.2) -> int:
    """Sample NVML memory of every GPU on this node into `out` (CSV, wall-clock time)."""
    probe = nvml_probe()
    if probe is None:
        raise EvidenceError(
            "NVML is not usable here (no NVIDIA driver, or pip install 'golive[gpu]')"
        )
    rows = 0
    deadline = time.monotonic() + duration_s
    with out.open("w", newline="") as handle:
        writer: csv.DictWriter[str] | None = None
        while time.monotonic() < deadline:
            values = {"wall_time": round(time.time(), 3), **(await probe())}
            if writer is None:
                writer = csv.DictWriter(handle, fieldnames=list(values))
                writer.writeheader()
            writer.writerow(values)
            handle.flush()
            rows += 1
            await asyncio.sleep(interval_s)
    return rows


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    phase: str
    start: float
    end: float


def merge_gpu_curve(
    text: str, source: str, timeline: Sequence[PhaseSpan]
) -> tuple[str, dict[str, float]]:
    """Label each sampled row with the phase running then; peak MiB per phase and GPU."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "wall_time" not in reader.fieldnames:
        raise ConfigError(
            f"--gpu-curve {source}: not a curve from `golive env collect --gpu-curve`"
        )
    gpus = [f for f in reader.fieldnames if f.endswith("_used_mib")]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["wall_time", "phase", *gpus])
    writer.writeheader()
    peaks: dict[str, float] = {}
    for row in reader:
        try:
            at = float(row["wall_time"])
        except (TypeError, ValueError):
            continue
        phase = next((s.phase for s in timeline if s.start <= at <= s.end), "outside")
        writer.writerow({"wall_time": at, "phase": phase, **{g: row.get(g, "") for g in gpus}})
        for gpu in gpus:
            try:
                value = float(row[gpu])
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value) or value < 0:  # not a reading
                continue
            key = f"{phase}:{gpu}"
            peaks[key] = max(value, peaks.get(key, value))
    return out.getvalue(), peaks
