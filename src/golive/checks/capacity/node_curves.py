"""The node-side GPU curves of a capacity run read back from the bundle, and
`capacity.gpu_memory` judged from them (issue 30 §4): each node's peak MiB per phase and GPU.

What the run asked for and met is `memory/node-curves.json`: copies of the `--gpu-curve`
files, whether the DCGM exporter (`capacity.prometheus_url`) and the Ray nodes' samplers
(`--chain-ray`) were read, and the problems only the run could see (a file it could not
read, a query that got no answer, a sampler job that ended early). The curves themselves
come from the raw lines and answers the bundle keeps — the Ray samplers' lines, the
exporter's answers — labelled by phase from `metrics/capacity-phases.json`; the merged
`memory/gpu-*.csv` are golive's rendering of them, never read back. `golive decide` judges
the check again the same way, so a sealed bundle needs no reviewer's word for it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_LONG_INPUT_REQUESTS,
    CAPACITY_PHASES,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    DCGM_FREE,
    DCGM_USED,
    EFFECTIVE_CONFIG,
    MEMORY_CURVE,
    NODE_CURVES,
    RAY_GPU_CURVE,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.memory_curve import curve_number
from golive.config import GoliveConfig
from golive.evidence import dcgm
from golive.evidence.gpu_curve import PhaseSpan, merge_gpu_curve
from golive.evidence.ray_gpu_curve import node_curves
from golive.results import CAPACITY_RESULT, CheckResult, Status

CHECK = "capacity.gpu_memory"
COPY_PREFIX = "memory/node-curve-"
# the capacity keys by which a run asks the nodes for their GPU memory
ASKING_KEYS = ("prometheus_url", "gpu_curves", "sample_gpus")
SUSTAINED = "sustained"
SPAN_SLACK_S = 5.0  # a phase's span against its requests' send times and its window's length
# each load phase's requests, whose send times its span must hold
PHASE_REQUESTS = (
    ("long_input", CAPACITY_LONG_INPUT_REQUESTS),
    ("concurrency", CAPACITY_CONCURRENCY_REQUESTS),
    (SUSTAINED, CAPACITY_SUSTAINED_REQUESTS),
)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def curve_copy(stem: str) -> str:
    """Where a `--gpu-curve` file's text is kept in the bundle."""
    return f"{COPY_PREFIX}{_SAFE.sub('_', stem)}.csv"


@dataclass
class NodeCurveSet:
    """Each node's curve as `golive env collect --gpu-curve` writes it ([(name, csv text)]),
    what keeps them from showing every node, the files read and the run's phases."""

    curves: list[tuple[str, str]] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # curve name: "file", "ray", "dcgm"
    problems: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    timeline: list[PhaseSpan] = field(default_factory=list)


def asked_node_curves(root: Path) -> bool:
    """The bundle's saved config names the DCGM exporter's Prometheus and its capacity
    windows ran: the run read node curves, whatever files are left."""
    capacity = capacity_run_config(root, "capacity")
    return capacity is not None and any(bool(capacity.get(k)) for k in ASKING_KEYS)


def capacity_run_config(root: Path, section: str) -> Mapping[str, Any] | None:
    """A section of the bundle's saved config where its capacity windows ran (None where they
    did not, or it has no such section). An unreadable config is None too: it is named by
    the judging of the config itself."""
    if not (root / MEMORY_CURVE).is_file():
        return None
    try:
        saved = yaml.safe_load((root / EFFECTIVE_CONFIG).read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return None
    found = saved.get(section) if isinstance(saved, Mapping) else None
    return found if isinstance(found, Mapping) else None


def read_node_curves(evidence: BundleReader, config: GoliveConfig) -> NodeCurveSet | None:
    """The node curves the bundle keeps; None where the run read none (no record, no raw
    line or answer, no exporter in the config). Raw lines without the record, or beside a
    record that does not list them, are a problem, never taken alone or left out."""
    record = evidence.json(NODE_CURVES)
    raw = [p for p in (RAY_GPU_CURVE, DCGM_USED) if (evidence.root / p).exists()]
    copies = sorted(f"memory/{p.name}" for p in (evidence.root / "memory").glob("node-curve-*.csv"))
    asked = config.capacity.prometheus_url is not None
    if record is None and not raw and not copies and not _asked_of_nodes(config):
        return None
    if not isinstance(record, Mapping):
        why = "is missing" if record is None else "is not a record"
        return NodeCurveSet(
            problems=[f"{NODE_CURVES} {why}: what the run asked of the nodes is unknown"],
            files=raw,
        )
    out = NodeCurveSet(files=[NODE_CURVES])
    problems = record.get("problems")
    out.problems += [str(p) for p in problems] if isinstance(problems, list) else []
    listed = record.get("gpu_curves")
    for entry in listed if isinstance(listed, list) else []:
        name = entry.get("name") if isinstance(entry, Mapping) else None
        rel = entry.get("file") if isinstance(entry, Mapping) else None
        text = evidence.text(rel) if isinstance(rel, str) and rel.startswith(COPY_PREFIX) else None
        if not isinstance(name, str) or text is None or rel in out.files:
            out.problems.append(f"{NODE_CURVES}: a --gpu-curve copy is missing ({entry!r:.120})")
            continue
        out.curves.append((name, text))
        out.sources[name] = "file"
        out.files.append(str(rel))
    unlisted = [c for c in copies if c not in out.files]
    unread = [
        p
        for p, flag in ((RAY_GPU_CURVE, "ray"), (DCGM_USED, "dcgm"))
        if p in raw and record.get(flag) is not True
    ]
    if unlisted or unread:
        out.problems.append(f"{NODE_CURVES} does not list {', '.join(unlisted + unread)}")
    if record.get("ray") is True:
        _ray(evidence, out)
    if record.get("dcgm") is True:
        _dcgm(evidence, out)
    out.timeline = _timeline(evidence.json(CAPACITY_PHASES))
    out.files.append(CAPACITY_PHASES)
    if asked and out.timeline and record.get("dcgm") is not True:
        out.problems.append(
            f"the config names capacity.prometheus_url, but {NODE_CURVES} says the DCGM "
            "exporter was not read"
        )
    if config.capacity.sample_gpus and record.get("ray") is not True:
        out.problems.append(
            f"the config asks for the Ray nodes' samplers (capacity.sample_gpus), but "
            f"{NODE_CURVES} says they were not read"
        )
    # every --gpu-curve file the config names is a copy listed or a file the run could not read
    unreadable = sum(1 for p in out.problems if p.startswith("--gpu-curve "))
    entries = len(listed) if isinstance(listed, list) else 0
    if len(config.capacity.gpu_curves) != entries + unreadable:
        out.problems.append(
            f"the config names {len(config.capacity.gpu_curves)} --gpu-curve file(s) "
            f"(capacity.gpu_curves), {NODE_CURVES} accounts for {entries + unreadable}"
        )
    names = [name for name, _ in out.curves]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # one name, two nodes' rows: neither could be told apart
        out.problems.append(f"curves named twice: {', '.join(twice)}")
    if not out.timeline:
        out.problems.append(f"no phase timeline in {CAPACITY_PHASES}: the rows' phases are unknown")
    else:
        out.problems += _timeline_problems(evidence, out.timeline)
    return out


def _asked_of_nodes(config: GoliveConfig) -> bool:
    return any(bool(getattr(config.capacity, key)) for key in ASKING_KEYS)


def _timeline_problems(evidence: BundleReader, timeline: Sequence[PhaseSpan]) -> list[str]:
    """The phases' spans held to what else the bundle says of them: they do not overlap,
    each load phase's span holds its requests' send times (a phase whose requests are kept
    has a span), and the sustained span is as long as its window (`wall_s`)."""
    ordered = sorted(timeline, key=lambda s: s.start)
    if any(a.end > b.start for a, b in itertools.pairwise(ordered)):
        return [f"{CAPACITY_PHASES}: the phases' spans overlap"]
    out = []
    for phase, rel in PHASE_REQUESTS:
        sent = [t for row in evidence.records(rel) if (t := curve_number(row.started_at))]
        spans = [s for s in timeline if s.phase == phase]
        if sent and not spans:
            out.append(f"{CAPACITY_PHASES} has no {phase} span, though {rel} holds its requests")
        elif sent and not (
            spans[-1].start - SPAN_SLACK_S <= min(sent) <= max(sent) <= spans[-1].end + SPAN_SLACK_S
        ):
            out.append(
                f"{CAPACITY_PHASES}: the {phase} span does not hold its requests' send times "
                f"({rel})"
            )
    stats = evidence.json(CAPACITY_SUSTAINED)
    wall = curve_number(stats.get("wall_s")) if isinstance(stats, Mapping) else None
    spans = [s for s in timeline if s.phase == SUSTAINED]
    if spans and wall is not None and spans[-1].end - spans[-1].start < wall - SPAN_SLACK_S:
        out.append(
            f"{CAPACITY_PHASES}: the sustained span ({spans[-1].end - spans[-1].start:.0f} s) is "
            f"shorter than the window ({wall:.0f} s, {CAPACITY_SUSTAINED})"
        )
    return out


def _ray(evidence: BundleReader, out: NodeCurveSet) -> None:
    if not (evidence.root / RAY_GPU_CURVE).exists():
        if not out.problems:  # the sampler job that never started says why
            out.problems.append(f"{RAY_GPU_CURVE} is missing: the Ray nodes' rows are gone")
        return
    lines = evidence.jsonl(RAY_GPU_CURVE)
    out.files.append(RAY_GPU_CURVE)
    started = [line for line in lines if "alive_nodes" in line]
    if lines and (not started or type(started[0].get("gpu_nodes")) is not int):
        out.problems.append(
            f"{RAY_GPU_CURVE} has no start line counting the cluster's GPU nodes: a node left "
            "out could not be told"
        )
    got = node_curves(lines)
    out.curves += got.curves
    out.sources |= {name: "ray" for name, _ in got.curves}
    out.problems += got.problems


def _dcgm(evidence: BundleReader, out: NodeCurveSet) -> None:
    if not (evidence.root / DCGM_USED).exists():
        if not out.problems:  # the query that got no answer says why
            out.problems.append(f"{DCGM_USED} is missing: the exporter's answers are gone")
        return
    out.files += [p for p in (DCGM_USED, DCGM_FREE) if (evidence.root / p).exists()]
    try:
        used = dcgm.series_of(evidence.text(DCGM_USED) or "", DCGM_USED)
        free = dcgm.series_of(evidence.text(DCGM_FREE) or "", DCGM_FREE)
    except ValueError as exc:
        out.problems.append(str(exc))
        return
    if not used:
        out.problems.append(
            f"{DCGM_USED} holds no {dcgm.USED} series over the run: check capacity.dcgm_selector"
        )
    got = [(f"dcgm-{node}", text) for node, text in dcgm.node_curves(used, free).items()]
    out.curves += got
    out.sources |= {name: "dcgm" for name, _ in got}


def _timeline(saved: object) -> list[PhaseSpan]:
    spans = []
    for span in saved if isinstance(saved, list) else ():
        start = span.get("start") if isinstance(span, Mapping) else None
        end = span.get("end") if isinstance(span, Mapping) else None
        phase = span.get("phase") if isinstance(span, Mapping) else None
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end))
        if not isinstance(phase, str) or not numbers or end < start:  # type: ignore[operator]
            return []
        spans.append(PhaseSpan(phase, float(start), float(end)))  # type: ignore[arg-type]
    return spans


def merged_name(name: str) -> str:
    """The merged rendering of a node's curve (for the report; never read back)."""
    return f"memory/gpu-{name}.csv"


def judge_gpu_memory(evidence: BundleReader, config: GoliveConfig) -> list[CheckResult]:
    """`capacity.gpu_memory`: every node curve's peak MiB per phase and GPU (rows outside the
    run's phases and values that are not finite are not peaks); `no_data` naming what keeps
    a node unmeasured, beside the curves that came."""
    return gpu_memory_of(read_node_curves(evidence, config))


def gpu_memory_of(found: NodeCurveSet | None) -> list[CheckResult]:
    """`capacity.gpu_memory` from the node curves as read back (none: no check)."""
    if found is None:
        return []
    measurements: dict[str, float] = {}
    for name, text in found.curves:
        try:
            _, peaks = merge_gpu_curve(text, name, found.timeline)
        except Exception as exc:  # a copy in any shape: named, never a traceback
            found.problems.append(f"{name}: not a GPU curve ({type(exc).__name__}: {exc})"[:300])
            continue
        measurements.update(
            {f"{name}:{k}": round(v, 1) for k, v in peaks.items() if not k.startswith("outside:")}
        )
    summary = f"GPU memory curves from {len(found.curves)} node(s) merged by phase"
    if measurements:
        summary += f"; peak {max(measurements.values()):.0f} MiB"
    else:
        found.problems.append("no GPU memory sampled within the run's phases")
    if found.problems:
        summary += f"; not measured: {'; '.join(found.problems)}"
    status = Status.PASS if measurements and not found.problems else Status.NO_DATA
    return [
        CAPACITY_RESULT(CHECK, status, summary, measurements, critical=False, evidence=found.files)
    ]
