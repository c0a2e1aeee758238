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

RAMP_PHASE = "concurrency"  # the memory curve's phase for the ramp's windows
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


def needed_share(
    total_mib: float, peak_mib: float, kv_pool_mib: float, kv_peak_usage: float
) -> float:
    """What one GPU needed at the busiest moment, as a share of it: what it held less the KV
    pool the engine never used."""
    return (peak_mib - kv_pool_mib * (1 - min(max(kv_peak_usage, 0.0), 1.0))) / total_mib


def first_reading(curve: SavedCurve, column: str) -> float | None:
    """A column's earliest sample (the engine idle, right after start-up)."""
    samples = curve.columns.get(column)
    return min(samples)[1] if samples else None


@dataclass(frozen=True, slots=True)
class StepSpare:
    """The least headroom of the engine's GPUs over every ramp window at one level (its step
    and the knee's repeats), each from the curve rows it names (`curve_rows`); None where a
    window's rows are not the ramp's or hold no reading of a GPU or the cache."""

    concurrency: int
    spare: float | None


def step_spares(
    rows: Sequence[Mapping[str, Any]],
    curve_text: str,
    gpus: Sequence[tuple[int, float]],
    kv_pool_mib: float,
) -> list[StepSpare]:
    """Each ramp level's least GPU headroom at its busiest moment, by the busiest-moment rule
    (what a GPU held less the pool the window left unused): the worst of its windows."""
    samples = list(csv.DictReader(io.StringIO(curve_text)))
    worst: dict[int, float | None] = {}
    for row in rows:
        level = row.get("concurrency")
        if type(level) is not int or level < 1:
            continue
        spare = _window_spare(row.get("curve_rows"), samples, gpus, kv_pool_mib)
        if level in worst:
            before = worst[level]
            spare = None if before is None or spare is None else min(before, spare)
        worst[level] = spare
    return [StepSpare(level, spare) for level, spare in sorted(worst.items())]


def _window_spare(
    span: object,
    samples: Sequence[Mapping[str, Any]],
    gpus: Sequence[tuple[int, float]],
    kv_pool_mib: float,
) -> float | None:
    if not (isinstance(span, list | tuple) and len(span) == 2):
        return None
    first, last = span
    if not (type(first) is int and type(last) is int and 0 <= first < last <= len(samples)):
        return None
    window = samples[first:last]
    if any(r.get("phase") != RAMP_PHASE for r in window):
        return None  # another phase's rows: not this window's
    kv = _peak(window, "kv_cache_usage_perc")
    spares = [
        None
        if (used := _peak(window, f"gpu{index}_used_mib")) is None or kv is None
        else 1 - needed_share(total, used, kv_pool_mib, kv)
        for index, total in gpus
    ]
    if not spares or None in spares:
        return None
    return min(s for s in spares if s is not None)


def concurrency_cap(spares: Sequence[StepSpare], min_headroom: float, below: int) -> int | None:
    """The highest ramp level under `below` (the sustained window's level) such that it and
    every level under it were measured with at least `min_headroom` spare; None where none."""
    cap = None
    for step in sorted(spares, key=lambda s: s.concurrency):
        if step.concurrency >= below or step.spare is None or step.spare < min_headroom:
            break
        cap = step.concurrency
    return cap


def _peak(window: Sequence[Mapping[str, Any]], column: str) -> float | None:
    values = [v for r in window if (v := curve_number(r.get(column))) is not None]
    return max(values, default=None)
