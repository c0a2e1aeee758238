"""The engine's GPUs as the deployment's own nodes sampled them, for `capacity.memory` where
golive ran off the GPU hosts (issue 30 §4): the Ray nodes' samplers (`--chain-ray
--sample-gpus`, `memory/ray-gpu-curve.jsonl`) and the DCGM exporter's answers
(`capacity.prometheus_url`, `memory/dcgm-fb-*.json`), each read back from the raw lines and
answers the bundle keeps, labelled by phase from the run's timeline
(`metrics/capacity-phases.json`) — never from the merged `memory/gpu-*.csv`, which golive
derives from them.

A node GPU is the engine's where it held at least what the engine printed it allocated
(weights, CUDA graphs, KV cache), as for golive beside a loopback target. Fewer such GPUs
than the launch's tensor x pipeline x data parallel size, a GPU node that never reported, a
sampled total that changes: unmeasured, never a pass on the GPUs that came.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from golive.bundle.store import BundleReader
from golive.checks.capacity.memory_curve import SavedCurve, curve_number
from golive.checks.capacity.memory_gpus import MAX_GPU_MIB, host_gpus
from golive.checks.capacity.memory_limits import launch_utilization
from golive.checks.capacity.node_curves import read_node_curves
from golive.config import GoliveConfig
from golive.evidence.gpu_curve import PhaseSpan
from golive.evidence.startup_log import StartupFacts

_GIB = 1024.0
MIN_GAP_S = 3.0  # a hole in a node's samples shorter than this is never judged one
COVER_SLACK_S = 10.0  # a node's rows may start or stop this long (or 5%) off the window's ends


@dataclass(frozen=True, slots=True)
class JudgedGpu:
    """One GPU `capacity.memory` judges: how it is named, its curve column (`..._used_mib`),
    its memory, and its NVML index on golive's own host (None: a node's)."""

    label: str
    column: str
    total_mib: float
    index: int | None = None

    @property
    def key(self) -> str:
        return self.column.removesuffix("_used_mib")


@dataclass
class NodeGpus:
    """The node curves as one SavedCurve (wall-clock time, phase from the timeline), the
    engine's GPUs among them, the files read and why they cannot be judged (or "")."""

    curve: SavedCurve = field(default_factory=SavedCurve)
    gpus: list[JudgedGpu] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    problem: str = ""


def node_gpus(
    evidence: BundleReader, config: GoliveConfig, facts: StartupFacts, allocated_mib: float
) -> NodeGpus | None:
    """The engine's GPUs from the node curves the bundle keeps (their rows within the run's
    phases); None where it keeps none."""
    got = read_node_curves(evidence, config)
    if got is None:
        return None
    found = NodeGpus(files=got.files)
    totals: dict[str, set[float]] = {}
    for name, text in got.curves:
        try:
            _add(found.curve, totals, name, text, got.timeline)
        except Exception as exc:  # a copy in any shape: named, never a traceback
            got.problems.append(f"{name}: not a GPU curve ({type(exc).__name__}: {exc})"[:300])
    bound = _largest_host_gpu(evidence)
    for column, sampled in totals.items():
        if any(not 0 < t <= bound for t in sampled):
            got.problems.append(
                f"{column.removesuffix('_used_mib')}: a memory total of "
                f"{max(sampled):.0f} MiB is not a GPU's (at most {bound:.0f})"
            )
    if got.problems:
        found.problem = "node GPU memory incomplete: " + "; ".join(got.problems)
        return found
    found.gpus, found.problem = _engine_gpus(found.curve, totals, facts, allocated_mib, got.sources)
    if found.problem:
        return found
    # each GPU's holes first, then its cover of the sustained window: the first named
    sustained = [s for s in got.timeline if s.phase == "sustained"][-1:]
    problems = [
        *(_gap(found.curve.columns[gpu.column], gpu) for gpu in found.gpus),
        *(
            _short(found.curve.series(g.column, s.phase), s, g)
            for s in sustained
            for g in found.gpus
        ),
    ]
    found.problem = next((p for p in problems if p), "")
    return found


def _short(points: Sequence[tuple[float, float]], span: PhaseSpan, gpu: JudgedGpu) -> str:
    """Why `gpu`'s rows do not cover the sustained window (a sampler that stopped early, an
    exporter that missed its end), or ""."""
    slack = max(COVER_SLACK_S, 0.05 * (span.end - span.start))
    first = min((t for t, _ in points), default=None)
    last = max((t for t, _ in points), default=None)
    if first is None or last is None:
        return f"{gpu.label}: no sample in the sustained window"
    if first > span.start + slack or last < span.end - slack:
        return (
            f"{gpu.label}: its samples cover {last - first:.0f} s of the "
            f"{span.end - span.start:.0f} s sustained window (from {first - span.start:+.0f} s "
            f"to {last - span.end:+.0f} s of its ends): the curve stopped early or started late"
        )
    return ""


def _add(
    curve: SavedCurve,
    totals: dict[str, set[float]],
    node: str,
    text: str,
    timeline: Sequence[PhaseSpan],
) -> None:
    """One node's rows into `curve` as `<node>:gpu<i>_used_mib`, its totals into `totals`."""
    if not timeline:
        return
    begun, ended = min(s.start for s in timeline), max(s.end for s in timeline)
    for row in csv.DictReader(io.StringIO(text)):
        at = curve_number(row.get("wall_time"))
        if at is None or not begun <= at <= ended:
            continue  # before or after the run: not the engine's load, nor its first reading
        # between two phases (results packed, a restart awaited) it still counts for peaks
        phase = next((s.phase for s in timeline if s.start <= at <= s.end), "between")
        for column, value in row.items():
            number = curve_number(value)
            if column is None or number is None or not column.startswith("gpu"):
                continue
            name = f"{node}:{column}"
            if column.endswith("_total_mib"):
                totals.setdefault(name.removesuffix("_total_mib") + "_used_mib", set()).add(number)
            elif column.endswith("_used_mib"):
                curve.columns.setdefault(name, []).append((at, number))
                curve.by_phase.setdefault((phase, name), []).append((at, number))


def _largest_host_gpu(evidence: BundleReader) -> float:
    """The largest GPU memory the env section's host records list (a 1% margin: DCGM's used
    and free leave out what the driver reserves), else the most a GPU has."""
    totals = [curve_number(gpu.get("memory_total_mib")) for gpu in host_gpus(evidence)]
    plausible = [t * 1.01 for t in totals if t is not None and 0 < t <= MAX_GPU_MIB]
    return max(plausible, default=float(MAX_GPU_MIB))


def _gap(points: Sequence[tuple[float, float]], gpu: JudgedGpu) -> str:
    """Why `gpu`'s rows within the run have a hole a peak could hide in (a sampler that
    stalled, samples deleted), or "": no gap over three times the usual spacing (3 s at least)."""
    times = sorted(t for t, _ in points)
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    if not gaps:
        return ""
    usual = gaps[len(gaps) // 2]
    if gaps[-1] > max(3 * usual, MIN_GAP_S):
        return (
            f"{gpu.label}: its samples stop for {gaps[-1]:.1f} s within the run (usually every "
            f"{usual:.1f} s): a peak could lie in the gap"
        )
    return ""


def _engine_gpus(
    curve: SavedCurve,
    totals: Mapping[str, set[float]],
    facts: StartupFacts,
    allocated_mib: float,
    sources: Mapping[str, str],
) -> tuple[list[JudgedGpu], str]:
    out: list[JudgedGpu] = []
    for column in sorted(curve.columns):
        peak = curve.peak(column) or 0.0
        if peak < allocated_mib:
            continue  # not the engine's: it never held what the engine allocated
        total = totals.get(column, set())
        label = column.removesuffix("_used_mib").replace(":gpu", " GPU")
        # DCGM's used + free may move by a MiB; more is not one GPU's memory
        if not total or max(total) - min(total) > 0.01 * max(total):
            return [], (
                f"{label}: its memory total was "
                + ("never sampled" if not total else f"sampled as {sorted(total)[:4]} MiB")
                + ": the curve is not one GPU's"
            )
        budget = launch_utilization(facts)
        if budget is not None and budget * max(total) - allocated_mib > 0.1 * max(total):
            return [], (
                f"{label}: a total of {max(total):.0f} MiB does not fit the launch: vLLM budgets "
                f"{budget:g} of it and printed {allocated_mib:.0f} MiB allocated, more than "
                "10% short of the budget"
            )
        out.append(JudgedGpu(label, column, max(total)))
    sizes = facts.parallel()
    wanted = max(1, sizes["tp"] * sizes["pp"] * sizes["dp"])
    # counted within one source (the Ray samplers, the DCGM exporter, the --gpu-curve files):
    # a GPU two sources sampled is one GPU, and their names need not agree
    by_source: dict[str, set[tuple[str, str]]] = {}
    for gpu in out:
        node, index = gpu.column.rsplit(":", 1)
        by_source.setdefault(sources.get(node, node), set()).add((node, index))
    seen = max((len(v) for v in by_source.values()), default=0)
    if seen < wanted:
        return [], (
            f"{seen} GPU(s) of one source's sampled nodes held what the engine printed it "
            f"allocated ({allocated_mib / _GIB:.1f} GiB: weights, CUDA graphs, KV cache); its "
            f"launch runs on {wanted} (tensor x pipeline x data parallel): the engine's GPUs "
            "were not all sampled by one source"
        )
    return out, ""
