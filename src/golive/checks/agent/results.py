"""From a case's runs to its check result: pass rate with a Wilson interval, failures grouped
by signature (with saved examples), the layer to blame, and what the decision needs
(critical → fail on repeated failure; non-critical → the feature to disable)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import AGENT_FAILURES
from golive.checks.agent.cases import AgentCase
from golive.checks.agent.rules import Finding, Layer, summarise
from golive.results import (
    CheckClass,
    CheckLimits,
    CheckResult,
    Classification,
    ResultsOf,
    Status,
    measured_number,
)

# an Agent case's pass rate and its Wilson 95% interval (the report charts them: `pass_rate`)
PASS_RATE = "pass_rate"
WILSON_LOW = "wilson_low"
WILSON_HIGH = "wilson_high"


EXAMPLES_PER_SIGNATURE = 3


@dataclass(frozen=True, slots=True)
class AgentAnswer:
    """One answer as the client saw it, and what the engine said to the same request."""

    mode: str  # "stream" | "plain"
    repeat: int
    findings: tuple[Finding, ...]
    engine_findings: tuple[Finding, ...] | None
    sdk: Finding | None
    layer: Layer
    request_id: str
    message: Mapping[str, Any]
    status: int | None

    @property
    def all_findings(self) -> tuple[Finding, ...]:
        return self.findings + ((self.sdk,) if self.sdk else ())


def case_result(
    case: AgentCase,
    runs: Sequence[AgentAnswer],
    repeated_failures: int,
    facts: Mapping[str, Any] | None = None,
    gateway: bool = False,
    bounded_share: float = 0.2,
    unsent: str | None = None,
) -> CheckResult:
    """`unsent`: why the run sent no case at all (no served model), said by a case without
    runs."""
    summary = summarise(case.name, [r.all_findings for r in runs])
    failed = [r for r in runs if r.all_findings]
    layers = Counter(r.layer for r in failed)
    layer = layers.most_common(1)[0][0] if layers else Layer.NONE
    evidence: tuple[str, ...] = (f"requests/agent.{case.name}.jsonl",)
    if gateway:
        evidence += (f"requests/agent.{case.name}.engine.jsonl",)
    if failed:
        evidence += (AGENT_FAILURES,)
    check_id = f"agent.{case.name}"
    result = ResultsOf(CheckClass.AGENT, evidence, critical=case.critical)
    measurements: dict[str, Any] = {
        "runs": summary.runs,
        "passed": summary.passed,
        PASS_RATE: round(summary.rate, 4),
        WILSON_LOW: round(summary.low, 4),
        WILSON_HIGH: round(summary.high, 4),
        # pass^k over all the runs (1 only when every run passed) and at k = 8, as tau-bench
        "pass_hat_k": _rounded(summary.pass_hat(summary.runs)),
        "pass_hat_8": _rounded(summary.pass_hat(8)),
        "stream_passed": sum(1 for r in runs if r.mode == "stream" and not r.all_findings),
        "plain_passed": sum(1 for r in runs if r.mode == "plain" and not r.all_findings),
        "signatures": "; ".join(f"{s} x{n}" for s, n in summary.signatures.items()) or None,
        "layer": layer.value if failed else None,
        "critical_case": case.critical,
        **dict(facts or {}),
    }
    rate = (
        f"{summary.passed}/{summary.runs} passed ({summary.rate:.0%}, 95% CI "
        f"{summary.low:.0%}–{summary.high:.0%})"
    )
    if not runs:
        why = "no run" if unsent is None else f"not sent: {unsent}"
        return result(check_id, Status.NO_DATA, f"{case.name}: {why}", measurements)
    note = retry_note(facts or {})
    # an engine that took in more requests than the client sent fails whether or not the
    # client's deadline fired (a layer retries by itself); without that, no timeout, no proof
    if facts and facts.get("timeouts_exercised") == 0 and not failed:
        return result(
            check_id,
            Status.NO_DATA,
            f"{case.name}: no attempt hit the client deadline, so the retry path was not "
            f"exercised{note}",
            measurements,
        )
    if not failed and facts and "attempts_sent" in facts and facts.get("engine_admitted") is None:
        return result(
            check_id,
            Status.NO_DATA,
            f"{case.name}: {rate} at the client, but the engine's own request counters could "
            "not be read, so a duplicate admitted behind the client's back cannot be ruled "
            f"out{note}",
            measurements,
        )
    if not failed:
        return result(
            check_id, Status.PASS, f"{case.name}: {rate} — {case.proves}{note}", measurements
        )
    top = next(iter(summary.signatures))
    example = next(f for r in failed for f in r.all_findings if f.signature == top)
    where = f"blamed on {layer.value}" + ("" if gateway else " (target measured as the engine)")
    text = f"{case.name}: {rate}; most often {top} ({example.detail}); {where}{note}"
    if len(failed) == len(runs) and all(s.startswith("transport.") for s in summary.signatures):
        return result(
            check_id, Status.ERROR, f"{case.name}: no answer at all — {text}", measurements
        )
    if (
        not case.critical
        and len(failed) >= repeated_failures  # one failure is never "not bounded"
        and len(failed) / len(runs) > bounded_share
    ):
        # the checklist's "known and bounded" defect: one that fails now and then
        return result(
            check_id,
            Status.FAIL,
            f"{text}. Non-critical, but failing in {len(failed) / len(runs):.0%} of its runs, "
            f"more than the {bounded_share:.0%} a known, bounded defect may "
            "(agent.max_bounded_failure_share): not bounded — fix it before go-live, or "
            f"remove {case.feature or case.name} from the application and the programme",
            {**measurements, "max_bounded_failure_share": bounded_share},
            critical=True,
        )
    if not case.critical:
        return result(
            check_id,
            Status.WARN,
            f"{text}. Non-critical: disable or rate-limit {case.feature or case.name}",
            measurements,
            classification=Classification.LIMIT_FEATURE,
            limits=CheckLimits(disable_feature=case.feature or case.name),
        )
    if len(failed) >= repeated_failures:
        return result(
            check_id,
            Status.FAIL,
            f"{text}. Repeated failure on a critical path",
            measurements,
        )
    return result(
        check_id, Status.WARN, f"{text}. One isolated failure (not repeated)", measurements
    )


def retry_note(facts: Mapping[str, Any]) -> str:
    """The retry case's account: deadline, timeouts, and the engine's own count."""
    if "attempts_sent" not in facts:
        return ""
    admitted = facts.get("engine_admitted")
    engine = (
        "the engine's counters were not readable"
        if admitted is None
        else f"the engine took in {admitted} requests for {facts['attempts_sent']} sent and "
        f"finished {facts.get('engine_finished') or 0:.0f} (given-up ones are dropped)"
    )
    return (
        f" [{facts['timeouts_exercised']} attempts given up at a "
        f"{facts['client_deadline_s']:.1f} s client deadline, each retried with the same "
        f"Idempotency-Key; {engine}]"
    )


def failure_examples(case: AgentCase, runs: Sequence[AgentAnswer]) -> list[dict[str, Any]]:
    """A few examples per failure signature, each pointing at its saved request (the lines
    of `requests/agent-failures.jsonl`)."""
    seen: Counter[str] = Counter()
    examples = []
    for run in runs:
        if not run.all_findings:
            continue
        signature = run.all_findings[0].signature
        if seen[signature] >= EXAMPLES_PER_SIGNATURE:
            continue
        seen[signature] += 1
        examples.append(
            {
                "case": case.name,
                "mode": run.mode,
                "repeat": run.repeat,
                "signature": signature,
                "findings": [
                    {"signature": f.signature, "detail": f.detail} for f in run.all_findings
                ],
                "engine_findings": None
                if run.engine_findings is None
                else [{"signature": f.signature, "detail": f.detail} for f in run.engine_findings],
                "layer": run.layer.value,
                "request_id": run.request_id,
                "http_status": run.status,
                "message": dict(run.message),
                "requests_file": f"requests/agent.{case.name}.jsonl",
            }
        )
    return examples


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass(frozen=True, slots=True)
class PassRate:
    """An Agent case's share of passing runs and its Wilson 95% interval (None: not stated)."""

    rate: float
    low: float | None
    high: float | None


def pass_rate(measurements: Mapping[str, object]) -> PassRate | None:
    """An Agent case's pass rate (None: the check measured none)."""
    rate = measured_number(measurements.get(PASS_RATE))
    if rate is None:
        return None
    low, high = (measured_number(measurements.get(k)) for k in (WILSON_LOW, WILSON_HIGH))
    return PassRate(rate, low, high)
