"""`capacity.memory`'s limits beside growth (issue 29 §3): what the loaded model leaves of each
GPU, and — where the sustained load lacked headroom — the highest ramp step that kept it.

vLLM sizes its KV cache as `--gpu-memory-utilization` of the GPU less what its start-up
profile measured (weights, the activation peak, CUDA graphs, memory outside torch). So
`utilization x total - pool` is what the loaded model needs before any request, its
initialisation peak included; NVML's first reading after start-up, less the pool, is a floor
(the activation peak is released by then). The pool itself is a reservation, not a need: the
busiest moment's use of it is judged under load, step by step.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.checks.capacity.memory_curve import SavedCurve, curve_number
from golive.evidence.startup_log import StartupFacts

VLLM_DEFAULT_UTILIZATION = 0.9  # `--gpu-memory-utilization` when the launch does not set it


def launch_utilization(facts: StartupFacts) -> float | None:
    """The share of each GPU the launch let vLLM budget: its `--gpu-memory-utilization`, vLLM's
    default where unset; None where a fixed pool (`--kv-cache-memory-bytes`) replaces it or
    the value is not a share."""
    if facts.arg("kv_cache_memory_bytes"):
        return None
    value = facts.arg("gpu_memory_utilization")
    if value is None:
        return VLLM_DEFAULT_UTILIZATION
    number = curve_number(value)
    return number if number is not None and 0 < number <= 1 else None


def load_needed_mib(
    total_mib: float, kv_pool_mib: float, utilization: float | None, first_mib: float | None
) -> float | None:
    """What one GPU holds for the loaded model, the KV pool aside: the launch's budget less
    the pool, or NVML's first reading less the pool, whichever is larger; None with neither."""
    known = [
        needed
        for needed in (
            None if utilization is None else utilization * total_mib - kv_pool_mib,
            None if first_mib is None else first_mib - kv_pool_mib,
        )
        if needed is not None
    ]
    return max(known) if known else None


def first_reading(curve: SavedCurve, column: str) -> float | None:
    """A column's earliest sample (the engine idle, right after start-up)."""
    samples = curve.columns.get(column)
    return min(samples)[1] if samples else None


@dataclass(frozen=True, slots=True)
class StepSpare:
    """The least headroom of the engine's GPUs in one ramp step, from the curve rows the step
    names (`curve_rows`); None where those rows hold no reading of a GPU or the cache."""

    concurrency: int
    spare: float | None
    kv_peak: float | None


def step_spares(
    rows: Sequence[Mapping[str, Any]],
    curve_text: str,
    gpus: Sequence[tuple[int, float]],
    kv_pool_mib: float,
) -> list[StepSpare]:
    """Each ramp step's least GPU headroom at its busiest moment, by the busiest-moment rule
    (what a GPU held less the pool the step left unused), from its own curve rows."""
    samples = list(csv.DictReader(io.StringIO(curve_text)))
    out: list[StepSpare] = []
    for row in rows:
        level, span = row.get("concurrency"), row.get("curve_rows")
        if type(level) is not int:
            continue
        if not (isinstance(span, list | tuple) and len(span) == 2):
            out.append(StepSpare(level, None, None))
            continue
        first, last = span
        if not (type(first) is int and type(last) is int and 0 <= first < last <= len(samples)):
            out.append(StepSpare(level, None, None))
            continue
        window = samples[first:last]
        kv = _peak(window, "kv_cache_usage_perc")
        spares = [
            None
            if (used := _peak(window, f"gpu{index}_used_mib")) is None or kv is None
            else 1 - (used - kv_pool_mib * (1 - min(max(kv, 0.0), 1.0))) / total
            for index, total in gpus
        ]
        least = None if not spares or None in spares else min(s for s in spares if s is not None)
        out.append(StepSpare(level, least, kv))
    return out


def concurrency_cap(spares: Sequence[StepSpare], min_headroom: float, below: int) -> int | None:
    """The highest ramp step under `below` (the sustained window's level) such that it and
    every step under it were measured with at least `min_headroom` spare; None where none."""
    cap = None
    for step in sorted(spares, key=lambda s: s.concurrency):
        if step.concurrency >= below or step.spare is None or step.spare < min_headroom:
            break
        cap = step.concurrency
    return cap


def _peak(window: Sequence[Mapping[str, Any]], column: str) -> float | None:
    values = [v for r in window if (v := curve_number(r.get(column))) is not None]
    return max(values, default=None)
