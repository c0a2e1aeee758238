"""JUnit for CI gates (report/junit.py): nothing short of a pass reads as one, every testcase
has a time, and each SLO at each load window is a testcase of its own."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_ramp, judge_sustained
from golive.checks.capacity.slo import judge_slo
from golive.config import GoliveConfig
from golive.report.junit import junit_xml, record_spans
from golive.slo_config import SloConfig
from golive.verdict.document import CheckEntry, VerdictDocument

GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"


def _with_slo(stated: SloConfig) -> VerdictDocument:
    """The demo's verdict with capacity.slo judged from its records under `stated`."""
    config = GoliveConfig(slo=stated)
    reader = BundleReader(GOLDEN)
    slo = judge_slo(
        reader,
        config,
        judge_ramp(reader, config.capacity),
        judge_sustained(reader, config.capacity),
    )
    verdict = VerdictDocument.read(GOLDEN)
    return verdict.model_copy(update={"checks": (*verdict.checks, CheckEntry.of(slo))})


def _cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    return {c.get("name", ""): c for c in root.iter("testcase")}


def test_warn_and_no_data_are_failures_and_every_case_has_a_time() -> None:
    """The recorded demo: a warned check (a limit to observe) and a no_data one fail the CI
    job, critical or not; the sustained window's case lasts its 601 s of records."""
    verdict = VerdictDocument.read(GOLDEN)
    cases = _cases(junit_xml(verdict, record_spans(GOLDEN, verdict)))
    statuses = {c.id: (c.status.value, c.critical) for c in verdict.checks}
    assert all(case.get("time") is not None for case in cases.values())
    for check_id, (status, _critical) in statuses.items():
        failed = cases[check_id].find("failure") is not None
        assert failed == (status in ("fail", "warn", "no_data")), check_id
    assert any(s == "warn" for s, _ in statuses.values())
    assert any(s == "no_data" and not c for s, c in statuses.values())
    assert float(cases["capacity.sustained"].get("time", "0")) > 600


def test_each_slo_at_each_load_is_a_testcase_with_its_value_and_time() -> None:
    """With a decode-speed floor of 2 tokens/s the demo's concurrency 4 (its ramp step and the
    sustained window pooled) meets it: a passing case holding its measured value, timed by
    its windows; the short steps below could not show it either way: skipped, never a pass;
    the check's own case passes."""
    cases = _cases(junit_xml(_with_slo(SloConfig(min_output_tokens_per_s_per_user=2))))
    held = cases["c4.min_output_tokens_per_s_per_user"]
    assert held.find("failure") is None
    assert held.find("skipped") is None
    assert "met" in (held.findtext("system-out") or "")
    assert float(held.get("time", "0")) > 600
    step = cases["c1.min_output_tokens_per_s_per_user"]
    assert step.find("failure") is None
    skipped = step.find("skipped")
    assert skipped is not None
    assert "target 2" in (skipped.get("message") or "")
    assert float(step.get("time", "0")) > 5
    assert cases["capacity.slo"].find("failure") is None


def test_a_missed_slo_fails_its_case() -> None:
    """A 1 s end-to-end objective the demo misses at concurrency 1: that case and the
    check's own are failures."""
    cases = _cases(junit_xml(_with_slo(SloConfig(e2e_p95_ms=1000))))
    failure = cases["c1.e2e_p95_ms"].find("failure")
    assert failure is not None
    assert failure.get("type") == "missed"
    assert cases["capacity.slo"].find("failure") is not None
