"""JUnit XML from a verdict, so CI pipelines can gate on golive: one testsuite per check
class, one testcase per check. `fail` is a failure, `error` an error, `no_data` a failure
when the check is critical (fail-closed), `skipped` is skipped; the outcome is a property."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from golive.verdict.document import CheckEntry, VerdictDocument


def junit_xml(verdict: VerdictDocument) -> str:
    checks = verdict.checks
    root = ET.Element(
        "testsuites",
        name=f"golive {verdict.command}",
        tests=str(len(checks)),
    )
    by_class: dict[str, list[CheckEntry]] = {}
    for check in checks:
        by_class.setdefault(check.check_class.value, []).append(check)
    failures = errors = 0
    for name, members in by_class.items():
        suite = ET.SubElement(root, "testsuite", name=f"golive.{name}", tests=str(len(members)))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="outcome", value=verdict.outcome.value)
        counts = {"failures": 0, "errors": 0, "skipped": 0}
        for check in members:
            case = ET.SubElement(suite, "testcase", classname=f"golive.{name}", name=check.id)
            status, summary = check.status.value, check.summary
            evidence = ", ".join(check.evidence)
            text = f"{summary}\nevidence: {evidence}" if evidence else summary
            if status == "fail" or (status == "no_data" and check.critical):
                ET.SubElement(case, "failure", message=summary[:500], type=status).text = text
                counts["failures"] += 1
            elif status == "error":
                ET.SubElement(case, "error", message=summary[:500], type=status).text = text
                counts["errors"] += 1
            elif status in ("skipped", "no_data"):
                ET.SubElement(case, "skipped", message=summary[:500])
                counts["skipped"] += 1
            else:
                ET.SubElement(case, "system-out").text = f"{status}: {summary}"
        for key, value in counts.items():
            suite.set(key, str(value))
        failures += counts["failures"]
        errors += counts["errors"]
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(verdict: VerdictDocument, path: Path) -> None:
    path.write_text(junit_xml(verdict), encoding="utf-8")
