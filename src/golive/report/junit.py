"""JUnit XML from a verdict, so CI pipelines can gate on golive: one testsuite per check
class, one testcase per check, and with SLOs stated one testcase per objective per load
(`capacity.slo`'s measurements: its windows pooled, the measured value, its state, their
length).

Nothing short of a pass reads as one: `fail` and `warn` (a limit to observe) are failures,
`no_data` is a failure whether critical or not (its message says what was not measured),
`error` an error; `skipped` (the config rules the check out) is skipped, and so is an SLO at
a load its samples could not show either way, or above the load that blocked the ceiling
(the check's own case carries the judgement).
Every testcase has a time: the span of the request records its evidence lists (first send
to last end), the windows' length for an SLO case, else 0 (judged from facts, no traffic);
the outcome is a property of each suite."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from golive.bundle.request_line import NOT_RECORDS
from golive.bundle.store import BundleReader
from golive.checks.capacity.slo import level_objectives
from golive.verdict.document import CheckEntry, VerdictDocument

SLO_CHECK = "capacity.slo"


def junit_xml(verdict: VerdictDocument, spans: Mapping[str, float] | None = None) -> str:
    """The XML; `spans`: seconds each record file covers (`record_spans`), for the times."""
    spans = spans or {}
    checks = verdict.checks
    root = ET.Element("testsuites", name=f"golive {verdict.command}")
    by_class: dict[str, list[CheckEntry]] = {}
    for check in checks:
        by_class.setdefault(check.check_class.value, []).append(check)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, members in by_class.items():
        suite = ET.SubElement(root, "testsuite", name=f"golive.{name}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="outcome", value=verdict.outcome.value)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        elapsed = 0.0
        for check in members:
            seconds = max((spans.get(p, 0.0) for p in check.evidence), default=0.0)
            _case(
                suite,
                f"golive.{name}",
                check.id,
                check.status.value,
                check.summary,
                check.evidence,
                seconds,
                counts,
            )
            elapsed += seconds
            if check.id == SLO_CHECK:
                for case in slo_cases(check.measurements):
                    _case(suite, "golive.slo", *case, counts=counts)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{elapsed:.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    status: str,
    summary: str,
    evidence: Iterable[str],
    seconds: float,
    counts: dict[str, int],
) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{seconds:.3f}")
    counts["tests"] += 1
    listed = ", ".join(evidence)
    text = f"{summary}\nevidence: {listed}" if listed else summary
    if status in ("fail", "warn", "no_data", "missed"):
        ET.SubElement(case, "failure", message=summary[:500], type=status).text = text
        counts["failures"] += 1
    elif status == "error":
        ET.SubElement(case, "error", message=summary[:500], type=status).text = text
        counts["errors"] += 1
    elif status in ("skipped", "unproven", "not-read"):
        ET.SubElement(case, "skipped", message=summary[:500])
        counts["skipped"] += 1
    else:
        ET.SubElement(case, "system-out").text = f"{status}: {summary}"


def slo_cases(
    measurements: Mapping[str, Any],
) -> list[tuple[str, str, str, tuple[str, ...], float]]:
    """(name, state, message, evidence, seconds) for each objective at each window."""
    out: list[tuple[str, str, str, tuple[str, ...], float]] = []
    for o in level_objectives(measurements):
        target = "?" if o.target is None else o.target
        message = (
            f"{o.objective} at {o.level}: {o.state}, measured {o.measured} from {o.samples} "
            f"samples (target {target})"
        )
        seconds = 0.0 if o.duration_s is None else float(o.duration_s)
        out.append((f"{o.level}.{o.objective}", o.state, message, (), seconds))
    return out


def record_spans(root: Path, verdict: VerdictDocument) -> dict[str, float]:
    """Seconds from the first send to the last end of each request-record file the checks
    list as evidence (`requests/*.jsonl`)."""
    reader = BundleReader(root)
    spans: dict[str, float] = {}
    listed = {p for c in verdict.checks for p in c.evidence if p.startswith("requests/")}
    for path in listed - set(NOT_RECORDS):
        starts, ends = [], []
        for line in reader.records(path):
            e2e = line.e2e_s
            starts.append(line.started_at)
            ends.append(line.started_at + (line.attempt_s(e2e) if e2e is not None else 0.0))
        if starts:
            spans[path] = max(ends) - min(starts)
    return spans


def write_junit(verdict: VerdictDocument, path: Path, bundle: Path | None = None) -> None:
    spans = record_spans(bundle, verdict) if bundle is not None else None
    path.write_text(junit_xml(verdict, spans), encoding="utf-8")
