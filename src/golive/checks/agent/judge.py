"""The Agent contract judged from the bundle alone (issue 18): every case's saved answers
(`requests/agent.<case>.jsonl`, and `.engine.jsonl` behind a gateway) parsed again and read
against the case's contract, the retry case's account from its saved attempts and the engine's
counters (`metrics/agent-retry-*.prom`), with the cases and settings the run used
(`metrics/agent-plan.json`). The run calls this on the bundle it has just written;
`golive decide` calls it again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import AGENT_PLAN
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.checks.agent.cases import AgentCase, Kind
from golive.checks.agent.response import (
    Contract,
    client_deadline_s,
    engine_admitted,
    hidden_retries,
    message_of,
    reference_labels,
    reference_prompt_tokens,
    response_findings,
    retry_findings,
    sdk_finding,
)
from golive.checks.agent.results import AgentAnswer, case_result, failure_examples
from golive.checks.agent.rules import (
    Expect,
    Finding,
    Layer,
    attribute,
    classify_reasoning_field,
    parity,
    reasoning_fields_written,
)
from golive.checks.agent.select import due_criticality
from golive.checks.context import unserved
from golive.checks.coverage import SHIPPED_CASES, agent_coverage
from golive.checks.gateway import asked_prompt, held_to_engine, request_rewritten
from golive.checks.relaxations import Relaxations, lowered_cases, relaxed_gaps
from golive.config import AgentConfig
from golive.errors import BadResponse
from golive.metrics import MetricsDelta, Snapshot, parse_metrics
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig
from golive.results import AGENT_RESULT, CheckResult, Status
from golive.traffic.records import FailureKind, ParsedResponse, reparsed

MODES = ("stream", "plain")


def stream_file(case: AgentCase, engine: bool = False) -> str:
    """The record stream (under `requests/`) of a case's answers from the target or engine."""
    return f"agent.{case.name}" + (".engine" if engine else "")


def case_to_json(case: AgentCase) -> dict[str, Any]:
    return {
        **dataclasses.asdict(case),
        "expect": case.expect.value,
        "kind": case.kind.value,
    }


def case_from_json(data: Mapping[str, Any]) -> AgentCase:
    return AgentCase(
        name=str(data["name"]),
        proves=str(data["proves"]),
        expect=Expect(data["expect"]),
        messages=tuple(data.get("messages") or ()),
        tools=tuple(data.get("tools") or ()),
        tool_choice=data.get("tool_choice"),
        response_format=data.get("response_format"),
        max_tokens=data.get("max_tokens"),
        kind=Kind(data.get("kind") or Kind.PLAIN.value),
        critical=bool(data.get("critical", True)),
        feature=str(data.get("feature") or ""),
        extra=data.get("extra") or {},
    )


@dataclass(frozen=True, slots=True)
class AgentJudgement:
    results: list[CheckResult]
    examples: list[dict[str, Any]]  # a few failing answers per signature (agent-failures)


def contract_of(case: AgentCase, profile: Profile) -> Contract:
    agent = profile.agent
    return Contract(
        case.expect,
        case.tool_schemas,
        case.json_schema,
        agent.forbidden_content_markers,
        agent.reasoning_fields,
    )


def run_of(
    contract: Contract,
    mode: str,
    repeat: int,
    parsed: ParsedResponse,
    engine_answer: ParsedResponse | None,
    extra: Sequence[Finding] = (),
) -> AgentAnswer:
    """Findings for the answer the client got, the engine's own, and the layer to blame."""
    rewritten = request_rewritten(parsed, engine_answer)
    gateway = (Finding("gateway.request_rewritten", rewritten),) if rewritten else ()
    findings = (*response_findings(parsed, contract), *extra, *gateway)
    engine = None if engine_answer is None else tuple(response_findings(engine_answer, contract))
    sdk = sdk_finding(parsed)
    layer = attribute(
        engine if engine is not None else findings,  # no --engine-url: the target is it
        findings if engine is not None else None,
        sdk is not None,
        any(f.signature.startswith("retry.") for f in extra),
    )
    message, _ = message_of(parsed)
    return AgentAnswer(
        mode,
        repeat,
        findings,
        engine,
        sdk,
        layer,
        parsed.record.request_id,
        message,
        parsed.record.status,
    )


def with_parity(runs: Sequence[AgentAnswer]) -> list[AgentAnswer]:
    """Streamed and non-streamed deliveries of one request must carry the same calls.
    A mismatch is blamed where the non-streamed twin was blamed (a gateway rewriting one
    path), else on the engine's streaming parser."""
    plain = {r.repeat: r for r in runs if r.mode == "plain"}
    return [_parity(run, plain.get(run.repeat)) for run in runs]


def _parity(run: AgentAnswer, twin: AgentAnswer | None) -> AgentAnswer:
    if run.mode != "stream" or twin is None or not run.status == twin.status == 200:
        return run
    mismatch = parity(run.message, twin.message)
    if mismatch is None:
        return run
    layer = run.layer
    if not run.findings:
        layer = Layer.GATEWAY if twin.layer is Layer.GATEWAY else Layer.MODEL_OR_PARSER
    return dataclasses.replace(run, findings=(*run.findings, mismatch), layer=layer)


def judge_agent(
    evidence: BundleReader,
    profile: Profile,
    config: AgentConfig,
    programme: ProgrammeConfig | None = None,
    behind_gateway: bool = False,
) -> AgentJudgement:
    """Every planned case's check, from its saved answers; how critical a case is and how
    many failures are repeated come from the config and profile, not from the plan. With
    `programme` (a bundle judged on completeness), also `agent.coverage` from the runs."""
    plan = evidence.json(AGENT_PLAN)
    if not isinstance(plan, Mapping):
        return AgentJudgement([], [])
    cases = [due_criticality(case_from_json(c), config, profile) for c in plan.get("cases") or ()]
    results: list[CheckResult] = []
    examples: list[dict[str, Any]] = []
    every: list[ParsedResponse] = []  # every case's answers, for the reasoning-field contract
    repeats: dict[str, int] = {}  # each case's runs in its less-run mode
    unsent = _unsent(evidence, plan, behind_gateway or bool(plan.get("gateway")))
    for case in cases:
        contract = contract_of(case, profile)
        answers = _by_label(evidence.records(f"requests/{stream_file(case)}.jsonl"))
        every += answers.values()
        facts: dict[str, Any] = {}
        if case.kind is Kind.RETRY:
            runs, facts = _retry_runs(evidence, plan, case, contract, answers)
        pairs: list[tuple[str, tuple[ParsedResponse | None, ParsedResponse | None]]] = []
        engine = _by_label(evidence.records(f"requests/{stream_file(case, True)}.jsonl"))
        # behind a gateway: as the config or the plan says, or as the records show
        gateway = (
            behind_gateway
            or bool(plan.get("gateway"))
            or bool(engine)
            or any(asked_prompt(a) for a in answers.values())
        )
        if case.kind is not Kind.RETRY:
            runs = _plain_runs(plan, case, contract, answers, engine)
            if gateway:
                pairs = [(label, (a, engine.get(label))) for label, a in answers.items()]
        result = case_result(
            case,
            runs,
            config.repeated_failures,
            facts,
            gateway=gateway,
            bounded_share=config.max_bounded_failure_share,
            unsent=unsent,
        )
        results.append(held_to_engine(result, pairs, f"requests/{stream_file(case, True)}.jsonl"))
        examples += failure_examples(case, runs)
        repeats[case.name] = min(sum(r.mode == mode for r in runs) for mode in MODES)
    client_field = plan.get("client_reasoning_field")
    if isinstance(client_field, str):
        files = tuple(f"requests/{stream_file(case)}.jsonl" for case in cases)
        results.append(_reasoning_contract(every, files, client_field))
    if programme is not None:
        recorded = [str(n) for n in plan.get("shipped") or () if isinstance(n, str)]
        required = list(dict.fromkeys((*SHIPPED_CASES, *recorded)))
        forced = profile.agent.critical_cases
        results.append(
            agent_coverage(
                programme,
                required,
                repeats,
                config.cases,
                forced,
                AGENT_PLAN,
                _weakened(programme, config),
            )
        )
    return AgentJudgement(results, examples)


def _unsent(evidence: BundleReader, plan: Mapping[str, Any], gateway: bool) -> str | None:
    """Why the run sent no case (the plan says it had no served model), from the saved
    `/v1/models` answer that named none; None: the cases were sent."""
    unsent = plan.get("unsent")
    if not isinstance(unsent, Mapping):
        return None
    rel = str(unsent.get("models_answer") or "")
    lines = evidence.records(rel) if rel else []
    what = "GET /v1/models" + (" through the gateway" if gateway else "")
    if not lines:
        return f"no served model, and the {what} answer is not in the bundle ({rel or 'unnamed'})"
    wanted = unsent.get("model")
    why = unserved(reparsed(lines[-1]), wanted if isinstance(wanted, str) else None, what)
    return f"no served model ({why}; {rel})"


def _weakened(programme: ProgrammeConfig, config: AgentConfig) -> Relaxations:
    """The Agent rules the config weakens: its relaxed settings and the critical cases it
    lowers, each a gap without an owner."""
    settings, lowered = relaxed_gaps(programme, "agent", config), lowered_cases(programme, config)
    return Relaxations(settings.gaps + lowered.gaps, settings.owned + lowered.owned)


REASONING_CHECK = "agent.client_reasoning_field"


def _reasoning_contract(
    answers: Sequence[ParsedResponse], files: tuple[str, ...], client_field: str
) -> CheckResult:
    """The field the client reads reasoning from, against the fields every saved answer of
    every case (`files`) wrote it in (streamed answers keep the delta's own key)."""
    messages = [message_of(parsed)[0] for parsed in answers]
    counts = reasoning_fields_written(messages)
    status, summary = classify_reasoning_field(counts, client_field)
    return AGENT_RESULT(
        REASONING_CHECK,
        Status(status),
        summary,
        {"client_field": client_field, **{f"answers_with_{k}": v for k, v in counts.items()}},
        critical=False,
        evidence=files,
    )


def _by_label(lines: Sequence[RequestRecordLine]) -> dict[str, ParsedResponse]:
    return {line.label: reparsed(line) for line in lines}


def _plain_runs(
    plan: Mapping[str, Any],
    case: AgentCase,
    contract: Contract,
    answers: Mapping[str, ParsedResponse],
    engine: Mapping[str, ParsedResponse],
) -> list[AgentAnswer]:
    runs = [
        run_of(contract, mode, i, answers[label], engine.get(label))
        for i in range(int(plan["repeat"]))
        for mode in MODES
        if (label := f"agent-{case.name}-{mode}-{i}") in answers
    ]
    if float(plan["temperature"]) > 0:
        return runs  # two samples may differ; parity is judged at temperature 0
    return with_parity(runs)


def _retry_runs(
    evidence: BundleReader,
    plan: Mapping[str, Any],
    case: AgentCase,
    contract: Contract,
    answers: Mapping[str, ParsedResponse],
) -> tuple[list[AgentAnswer], dict[str, Any]]:
    """Per repeat: the attempt given up at the client deadline and its retry with the same
    idempotency key; the engine's counters must account for exactly the attempts sent."""
    references = [answers[label] for label in reference_labels(case.name) if label in answers]
    runs: list[AgentAnswer] = []
    timeouts = 0
    pairs = 0
    for i in range(int(plan["repeat"])):
        for mode in MODES:
            label = f"agent-{case.name}-{mode}-{i}"
            first, retry = answers.get(f"{label}-timeout"), answers.get(f"{label}-retry")
            if first is None or retry is None:
                continue
            pairs += 1
            failure = first.record.failure
            timeouts += failure is not None and failure.kind is FailureKind.TIMEOUT
            duplicates = retry_findings(first, retry, case.tool_schemas)
            runs.append(run_of(contract, mode, i, retry, None, duplicates))
    # the references the plan says were sent (one before the plan said), never more than the
    # bundle holds: a record added to the bundle cannot hide a hidden retry
    sent = min(len(references), int(plan.get("retry_references") or 1)) + 2 * pairs
    scrapes = plan.get("retry_scrapes") or {}
    before, after = (_snapshot(evidence, scrapes.get(k)) for k in ("before", "after"))
    delta = None if before is None or after is None else MetricsDelta(before, after)
    admitted = engine_admitted(delta, reference_prompt_tokens(references))
    hidden = hidden_retries(sent, admitted)
    if hidden is not None:
        runs = [
            dataclasses.replace(r, findings=(*r.findings, hidden), layer=Layer.IDEMPOTENCY)
            for r in runs
        ]
    deadline = client_deadline_s(references, float(plan["retry_deadline_fraction"]))
    return runs, {
        "client_deadline_s": round(deadline, 3),
        "attempts_sent": sent,
        "timeouts_exercised": timeouts,
        "engine_admitted": admitted,
        "engine_finished": None if delta is None else delta.counter("request_success"),
    }


def _snapshot(evidence: BundleReader, rel: str | None) -> Snapshot | None:
    """A saved scrape the run could read (the plan names it), parsed again."""
    text = None if rel is None else evidence.text(rel)
    if text is None:
        return None
    try:
        snapshot = parse_metrics(text, taken_at=0.0)
    except BadResponse:
        return None
    return snapshot if snapshot.has_vllm_metrics() else None
