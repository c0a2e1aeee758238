"""report.md's "Latency, throughput and goodput" section: the standard latency set of every
load window (recomputed from the records: `latency_files.latency_rows`), the throughput and
SLO ceilings with the workload's shape stated beside them, and each SLO at each window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from golive.bundle.layout import EFFECTIVE_CONFIG, WORKLOAD_SAMPLE
from golive.bundle.store import BundleReader
from golive.checks.capacity.latency_files import latency_rows
from golive.checks.capacity.measured import ramp_ceiling
from golive.checks.capacity.slo import slo_ceiling, slo_targets
from golive.config import GoliveConfig
from golive.report.junit import slo_cases
from golive.verdict.document import VerdictDocument


def latency_section(reader: BundleReader, verdict: VerdictDocument) -> str:
    """The section, or "" where no load window ran. Never raises: a record it cannot read is
    said, and the report is written whatever the evidence holds."""
    try:
        return _section(reader, verdict)
    except Exception as exc:  # evidence in any shape: a report line, never a failed report
        return f"\n## Latency, throughput and goodput\n\nnot built: ({exc!r:.200})\n"


def _config(reader: BundleReader) -> GoliveConfig:
    """The run's config as the bundle keeps it (the defaults where it cannot be read: the
    section then shows no goodput, which needs the stated SLOs)."""
    try:
        saved = yaml.safe_load(reader.text(EFFECTIVE_CONFIG) or "{}")
        return GoliveConfig.model_validate(saved if isinstance(saved, Mapping) else {})
    except (yaml.YAMLError, ValidationError):
        return GoliveConfig()


def _section(reader: BundleReader, verdict: VerdictDocument) -> str:
    config = _config(reader)
    rows = latency_rows(reader, config.slo)
    if not rows:
        return ""
    checks = {c.id: c for c in verdict.checks}
    ramp = checks.get("capacity.concurrency")
    slo = checks.get("capacity.slo")
    lines = ["", "## Latency, throughput and goodput", ""]
    knee = ramp_ceiling(ramp.measurements) if ramp is not None else None
    lines.append(f"- throughput ceiling (the ramp's): **{_level(knee)}**")
    if slo is not None:
        lines.append(
            f"- SLO ceiling: **{_level(slo_ceiling(slo.measurements))}** "
            f"({slo_targets(slo.measurements)}; {slo.status.value})"
        )
    sampled = bool(reader.jsonl(WORKLOAD_SAMPLE))
    lines.append(f"- workload behind these ceilings: {shape(rows, config, sampled)}")
    lines += [
        "",
        "Times in ms from each request's intended send; ITL is the gap between streamed tokens "
        "(all answers' gaps pooled), TPOT each answer's decode time per token after the first; "
        "n is the sample count of each percentile set.",
        "",
        "| phase | window | answered / sent | req/s | output tok/s | goodput req/s "
        "| TTFT p50 / p90 / p95 / p99 (n) | ITL p50 / p95 / p99 (n) | TPOT p50 / p95 "
        "| e2e p50 / p90 / p95 / p99 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['phase']} | {row['label']} | {row['completed']} / {row['requests']} | "
            f"{_num(row['request_throughput'])} | {_num(row['output_throughput'])} | "
            f"{_num(row['request_goodput'])} | "
            f"{_set(row, 'ttft', ('median', 'p90', 'p95', 'p99'))} | "
            f"{_set(row, 'itl', ('median', 'p95', 'p99'))} | "
            f"{_set(row, 'tpot', ('median', 'p95'), counted=False)} | "
            f"{_set(row, 'e2el', ('median', 'p90', 'p95', 'p99'), counted=False)} |"
        )
    if slo is not None:
        lines += ["", *_objectives(slo.measurements)]
    return "\n".join(lines) + "\n"


def shape(rows: Sequence[Mapping[str, Any]], config: GoliveConfig, sampled: bool = False) -> str:
    """Input and output tokens (p50 / p90 / p99 of the busiest window) and turns."""
    busiest = max(rows, key=lambda r: r.get("completed") or 0)
    tokens = "; ".join(
        f"{name} tokens p50 / p90 / p99 "
        + " / ".join(_num(busiest.get(f"p{q}_{key}")) for q in (50, 90, 99))
        for name, key in (("input", "input_len"), ("output", "output_len"))
    )
    turns = (
        "turns as in your --sample"
        if sampled
        else f"{config.capacity.turns + 1} user turn(s) a conversation"
    )
    return f"{tokens} ({busiest['phase']} {busiest['label']}); {turns}"


def _objectives(measurements: Mapping[str, Any]) -> list[str]:
    cases = slo_cases(measurements)
    if not cases:
        return []
    lines = ["| level.objective | state | measured, samples, target |", "|---|---|---|"]
    lines += [
        f"| {name} | {state} | {text.split(': ', 1)[-1]} |" for name, state, text, *_ in cases
    ]
    return lines


def _level(value: int | None) -> str:
    return "none shown" if value is None else f"concurrency {value}"


def _num(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _set(row: Mapping[str, Any], metric: str, names: Sequence[str], counted: bool = True) -> str:
    figures = " / ".join(_num(row.get(f"{n}_{metric}_ms")) for n in names)
    return f"{figures} ({row.get(f'{metric}_samples')})" if counted else figures
