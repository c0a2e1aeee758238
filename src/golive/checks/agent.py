"""`golive agent`: the Agent API contract, repeated until a pass rate means something.

Every case runs `repeat` times streamed and `repeat` times non-streamed. Each answer is read
against its contract (HTTP, framing, tool calls against their JSON Schemas, finish_reason,
reasoning/content fields, marker leaks) and against the official `openai` SDK's types. With
an engine URL behind a gateway target, each request also goes to the engine directly, so
the failing layer is named. Cases run one after another; a case's runs run concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from golive.checks.agent_cases import AgentCase, Kind
from golive.checks.agent_response import (
    Contract,
    engine_admitted,
    hidden_retries,
    message_of,
    response_findings,
    retry_findings,
    sdk_finding,
)
from golive.checks.agent_results import Run, case_result, no_model_result
from golive.checks.agent_rules import Finding, Layer, attribute, parity
from golive.checks.capacity import PhaseProgress, Quiet, served_model
from golive.checks.context import CheckContext, Target, scrape
from golive.config import AgentConfig
from golive.metrics import MetricsDelta, Snapshot
from golive.results import CheckResult
from golive.traffic.records import FailureKind, ParsedResponse


@dataclass(frozen=True, slots=True)
class AgentSettings:
    cases: tuple[AgentCase, ...]
    repeat: int = 20
    temperature: float = 0.6
    top_p: float | None = None
    max_tokens: int = 160
    concurrency: int = 4
    repeated_failures: int = 2
    retry_deadline_fraction: float = 0.5
    progress: PhaseProgress = field(default_factory=Quiet)


def agent_settings(
    config: AgentConfig, cases: tuple[AgentCase, ...], progress: PhaseProgress | None = None
) -> AgentSettings:
    return AgentSettings(
        cases=cases,
        repeat=config.repeat,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        concurrency=config.concurrency,
        repeated_failures=config.repeated_failures,
        retry_deadline_fraction=config.retry_deadline_fraction,
        progress=progress or Quiet(),
    )


async def run_agent(ctx: CheckContext, settings: AgentSettings) -> list[CheckResult]:
    model, _ = await served_model(ctx, "agent-setup")
    if model is None:
        return [no_model_result()]
    runner = _Runner(ctx, settings, model)
    results = []
    for case in settings.cases:
        sends = 2 * settings.repeat * (2 if case.kind is Kind.RETRY else 1)
        settings.progress.phase(f"agent: {case.name}", sends * (2 if ctx.engine else 1))
        facts: dict[str, Any] = {}
        if case.kind is Kind.RETRY:
            runs, facts = await runner.retry_case(case)
        else:
            runs = await runner.plain_case(case)
        results.append(
            case_result(
                ctx.bundle,
                case,
                runs,
                settings.repeated_failures,
                facts,
                gateway=ctx.engine is not None,
            )
        )
    return results


def _file(case: AgentCase, engine: bool = False) -> str:
    return f"agent.{case.name}" + (".engine" if engine else "")


class _Runner:
    def __init__(self, ctx: CheckContext, settings: AgentSettings, model: str) -> None:
        self.ctx = ctx
        self.settings = settings
        self.model = model
        self.gate = asyncio.Semaphore(settings.concurrency)

    def contract(self, case: AgentCase) -> Contract:
        agent = self.ctx.profile.agent
        return Contract(
            case.expect,
            case.tool_schemas,
            case.json_schema,
            agent.forbidden_content_markers,
            agent.reasoning_fields,
        )

    def body(self, case: AgentCase, stream: bool) -> dict[str, Any]:
        s = self.settings
        body = case.body(self.model, stream, s.max_tokens, s.temperature)
        if s.top_p is not None:
            body["top_p"] = s.top_p
        return body

    async def send(
        self,
        target: Target,
        case: AgentCase,
        body: Mapping[str, Any],
        label: str,
        engine: bool = False,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ParsedResponse:
        record = await target.chat(body, label, deadline_s=deadline_s, headers=headers)
        self.settings.progress.record(record.ok)
        return self.ctx.save(record, _file(case, engine))

    def judge(
        self,
        case: AgentCase,
        mode: str,
        repeat: int,
        parsed: ParsedResponse,
        engine_answer: ParsedResponse | None,
        extra: Sequence[Finding] = (),
    ) -> Run:
        """Findings for the answer the client got, the engine's own, and the layer to blame."""
        contract = self.contract(case)
        findings = (*response_findings(parsed, contract), *extra)
        engine = (
            None if engine_answer is None else tuple(response_findings(engine_answer, contract))
        )
        sdk = sdk_finding(parsed)
        layer = attribute(
            engine if engine is not None else findings,  # no --engine-url: the target is it
            findings if engine is not None else None,
            sdk is not None,
            any(f.signature.startswith("retry.") for f in extra),
        )
        message, _ = message_of(parsed)
        return Run(
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

    async def one(self, case: AgentCase, stream: bool, repeat: int) -> Run:
        mode = "stream" if stream else "plain"
        body = self.body(case, stream)
        label = f"agent-{case.name}-{mode}-{repeat}"
        async with self.gate:
            sends = [self.send(self.ctx.target, case, body, label)]
            if self.ctx.engine is not None:
                sends.append(self.send(self.ctx.engine, case, body, label, engine=True))
            answers = await asyncio.gather(*sends)
        return self.judge(case, mode, repeat, answers[0], answers[1] if answers[1:] else None)

    async def plain_case(self, case: AgentCase) -> list[Run]:
        runs = await asyncio.gather(
            *(self.one(case, s, i) for i in range(self.settings.repeat) for s in (True, False))
        )
        if self.settings.temperature > 0:
            return list(runs)  # two samples may differ; parity is judged at temperature 0
        return with_parity(runs)

    async def retry_case(self, case: AgentCase) -> tuple[list[Run], dict[str, Any]]:
        """A reference answer sets the client deadline; then per repeat an attempt given up
        at that deadline and a retry with the same idempotency key. The engine's counters
        must account for exactly the attempts sent."""
        before = await self.engine_snapshot("agent-retry-before", settle=False)
        reference = await self.send(
            self.ctx.target, case, self.body(case, True), f"agent-{case.name}-reference"
        )
        e2e = (reference.e2e_ms or 10_000.0) / 1000
        ttft = (reference.ttft_ms or 0.0) / 1000
        deadline = ttft + (e2e - ttft) * self.settings.retry_deadline_fraction

        async def pair(stream: bool, i: int) -> tuple[Run, bool]:
            mode = "stream" if stream else "plain"
            body = self.body(case, stream)
            key = {"Idempotency-Key": uuid.uuid4().hex}
            label = f"agent-{case.name}-{mode}-{i}"
            async with self.gate:
                first = await self.send(
                    self.ctx.target,
                    case,
                    body,
                    f"{label}-timeout",
                    deadline_s=deadline,
                    headers=key,
                )
                retry = await self.send(self.ctx.target, case, body, f"{label}-retry", headers=key)
            failure = first.record.failure
            timed_out = failure is not None and failure.kind is FailureKind.TIMEOUT
            duplicates = retry_findings(first, retry, case.tool_schemas)
            return self.judge(case, mode, i, retry, None, duplicates), timed_out

        pairs = await asyncio.gather(
            *(pair(s, i) for i in range(self.settings.repeat) for s in (True, False))
        )
        runs = [run for run, _ in pairs]
        sent = 1 + 2 * len(pairs)
        after = await self.engine_snapshot("agent-retry-after", settle=True)
        delta = None if before is None or after is None else MetricsDelta(before, after)
        per_request = (reference.usage or {}).get("prompt_tokens")
        admitted = engine_admitted(delta, per_request)
        hidden = hidden_retries(sent, admitted)
        if hidden is not None:
            runs = [
                dataclasses.replace(r, findings=(*r.findings, hidden), layer=Layer.IDEMPOTENCY)
                for r in runs
            ]
        return runs, {
            "client_deadline_s": round(deadline, 3),
            "attempts_sent": sent,
            "timeouts_exercised": sum(1 for _, timed_out in pairs if timed_out),
            "engine_admitted": admitted,
            "engine_finished": None if delta is None else delta.counter("request_success"),
        }

    async def engine_snapshot(self, window: str, settle: bool) -> Snapshot | None:
        """The engine's counters; `settle` waits (up to 30 s) until given-up requests are
        gone, so they are counted as finished (aborted) rather than still running."""
        engine = self.ctx.engine
        source = engine or self.ctx.target
        url = engine.url("/metrics") if engine is not None else self.ctx.metrics_url
        for _ in range(30 if settle else 1):
            snapshot = (await scrape(self.ctx, window, source, url)).snapshot
            if snapshot is None or not snapshot.value("num_requests_running"):
                return snapshot
            await asyncio.sleep(1.0)
        return snapshot


def with_parity(runs: Sequence[Run]) -> list[Run]:
    """Streamed and non-streamed deliveries of one request must carry the same calls.
    A mismatch is blamed where the non-streamed twin was blamed (a gateway rewriting one
    path), else on the engine's streaming parser."""
    plain = {r.repeat: r for r in runs if r.mode == "plain"}
    return [_parity(run, plain.get(run.repeat)) for run in runs]


def _parity(run: Run, twin: Run | None) -> Run:
    if run.mode != "stream" or twin is None or not run.status == twin.status == 200:
        return run
    mismatch = parity(run.message, twin.message)
    if mismatch is None:
        return run
    layer = run.layer
    if not run.findings:
        layer = Layer.GATEWAY if twin.layer is Layer.GATEWAY else Layer.MODEL_OR_PARSER
    return dataclasses.replace(run, findings=(*run.findings, mismatch), layer=layer)
