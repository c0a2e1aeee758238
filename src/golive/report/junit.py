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

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from golive.bundle.request_line import NOT_RECORDS
from golive.bundle.store import BundleReader
from golive.verdict.document import CheckEntry, VerdictDocument

SLO_CHECK = "capacity.slo"
# `<window>_<objective>_state` in capacity.slo's measurements (slo.slo_result)
_SLO_STATE = re.compile(r"^(?P<window>c\d+)_(?P<slo>[a-z0-9_]+)_state$")


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
    for key, state in measurements.items():
        found = _SLO_STATE.match(key)
        if found is None or not isinstance(state, str):
            continue
        window, slo = found["window"], found["slo"]
        value = measurements.get(f"{window}_{slo}")
        samples = measurements.get(f"{window}_{slo}_samples")
        duration = measurements.get(f"{window}_duration_s")
        target = _target(measurements.get("slo_targets"), slo)
        message = (
            f"{slo} at {window}: {state}, measured {value} from {samples} samples (target {target})"
        )
        seconds = float(duration) if isinstance(duration, int | float) else 0.0
        out.append((f"{window}.{slo}", state, message, (), seconds))
    return out


def _target(targets: object, slo: str) -> str:
    for part in str(targets or "").split(", "):
        key, _, value = part.partition("=")
        if key == slo:
            return value
    return "?"


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
