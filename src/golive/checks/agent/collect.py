"""`golive agent`: the Agent API contract, repeated until a pass rate means something.

Every case runs `repeat` times streamed and `repeat` times non-streamed. Each answer is read
against its contract (HTTP, framing, tool calls against their JSON Schemas, finish_reason,
reasoning/content fields, marker leaks) and against the official `openai` SDK's types. With
an engine URL behind a gateway target, each request also goes to the engine directly, so
the failing layer is named. The cases' runs share `agent.concurrency` slots; the retry
case runs alone, last, so the engine's counters around it count only its own requests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from golive.bundle.layout import AGENT_FAILURES, AGENT_PLAN
from golive.bundle.store import BundleReader
from golive.checks.agent.cases import AgentCase, Kind, shipped_cases
from golive.checks.agent.judge import case_to_json, judge_agent, stream_file
from golive.checks.agent.response import RETRY_REFERENCES, client_deadline_s, reference_labels
from golive.checks.context import CheckContext, PhaseProgress, Quiet, Target, scrape, served_model
from golive.checks.gateway import asking_prompt
from golive.config import AgentConfig, GoliveConfig
from golive.results import CheckResult
from golive.traffic.records import ParsedResponse

AGENT_SETUP = "agent-setup"  # requests/agent-setup.jsonl: /v1/models, where the run asked it


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The Agent suite as the config's `agent` section sets it, with the cases it selected."""

    cases: tuple[AgentCase, ...]
    config: AgentConfig = field(default_factory=AgentConfig)
    progress: PhaseProgress = field(default_factory=Quiet)

    @classmethod
    def from_config(
        cls,
        config: GoliveConfig,
        cases: tuple[AgentCase, ...],
        progress: PhaseProgress | None = None,
    ) -> AgentSettings:
        return cls(cases, config.agent, progress or Quiet())


async def run_agent(ctx: CheckContext, settings: AgentSettings) -> list[CheckResult]:
    """Send every case (the evidence), then judge the cases from the bundle as
    `golive decide` does. Without a served model nothing is sent, and the plan says so: each
    case is then judged unproven, naming the `/v1/models` answer that left it unsent."""
    served = await served_model(ctx, AGENT_SETUP)
    scrapes: dict[str, str | None] = {}
    # no served model: nothing is sent; the answer that named none, and the model asked for
    unsent: dict[str, str | None] | None = {
        "models_answer": f"requests/{AGENT_SETUP}.jsonl",
        "model": ctx.config.target.model,
    }
    if served is not None:
        scrapes = await _send_cases(ctx, settings, served.model)
        unsent = None
    ctx.bundle.write_json(
        AGENT_PLAN,
        {
            "cases": [case_to_json(c) for c in settings.cases],
            "shipped": [c.name for c in shipped_cases()],  # what agent.coverage requires
            "repeat": settings.config.repeat,
            "temperature": settings.config.temperature,
            "repeated_failures": settings.config.repeated_failures,
            "retry_deadline_fraction": settings.config.retry_deadline_fraction,
            "retry_references": RETRY_REFERENCES,
            "client_reasoning_field": settings.config.client_reasoning_field,
            "gateway": ctx.engine is not None,
            "retry_scrapes": scrapes,
            "unsent": unsent,
        },
    )
    judged = judge_agent(
        BundleReader(ctx.bundle.root),
        ctx.profile,
        ctx.config.agent,
        ctx.config.programme,
        ctx.engine is not None,
    )
    for example in judged.examples:
        ctx.bundle.append_jsonl(AGENT_FAILURES, example)
    return judged.results


async def _send_cases(
    ctx: CheckContext, settings: AgentSettings, model: str
) -> dict[str, str | None]:
    """Every case's runs; the retry case's engine scrapes (empty where there is none)."""
    runner = _Runner(ctx, settings, model)
    scrapes: dict[str, str | None] = {}
    copies = 2 if ctx.engine else 1  # behind a gateway each answer is also asked of the engine
    # The cases share the agent.concurrency slots (one case alone seldom fills them: on the
    # CPU target the demo's eleven cases took 108 s one after another); a retry case runs
    # alone after them, as the engine's counters around it must count only its requests.
    plain = [case for case in settings.cases if case.kind is not Kind.RETRY]
    if plain:
        name = plain[0].name if len(plain) == 1 else f"{len(plain)} cases"
        settings.progress.phase(
            f"agent: {name}", requests=2 * settings.config.repeat * len(plain) * copies
        )
        await asyncio.gather(*(runner.plain_case(case) for case in plain))
    for case in settings.cases:
        if case.kind is Kind.RETRY:
            settings.progress.phase(f"agent: {case.name}")  # attempts: as the server answers
            scrapes = await runner.retry_case(case)
    return scrapes


class _Runner:
    def __init__(self, ctx: CheckContext, settings: AgentSettings, model: str) -> None:
        self.ctx = ctx
        self.settings = settings
        self.model = model
        self.gate = asyncio.Semaphore(settings.config.concurrency)

    def body(self, case: AgentCase, stream: bool) -> dict[str, Any]:
        s = self.settings.config
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
        return self.ctx.save(record, stream_file(case, engine))

    async def one(self, case: AgentCase, stream: bool, repeat: int) -> None:
        mode = "stream" if stream else "plain"
        body = self.body(case, stream)
        label = f"agent-{case.name}-{mode}-{repeat}"
        async with self.gate:
            if self.ctx.engine is None:
                sends = [self.send(self.ctx.target, case, body, label)]
            else:  # both ask for the prompt the engine rendered, to be held to each other
                held = asking_prompt(body, self.ctx.facts.gateway_asks)
                sends = [
                    self.send(self.ctx.target, case, held, label),
                    self.send(self.ctx.engine, case, held, label, engine=True),
                ]
            await asyncio.gather(*sends)

    async def plain_case(self, case: AgentCase) -> None:
        await asyncio.gather(
            *(
                self.one(case, s, i)
                for i in range(self.settings.config.repeat)
                for s in (True, False)
            )
        )

    async def retry_case(self, case: AgentCase) -> dict[str, str | None]:
        """Reference answers, one after another, set the client deadline (the quickest of
        them); then per repeat an attempt given up at that deadline and a retry with the same
        idempotency key. Returns the engine scrapes before and after that the judge counts
        admitted requests with."""
        before = await self.engine_snapshot("agent-retry-before", settle=False)
        references = [
            await self.send(self.ctx.target, case, self.body(case, True), label)
            for label in reference_labels(case.name)
        ]
        deadline = client_deadline_s(references, self.settings.config.retry_deadline_fraction)

        async def pair(stream: bool, i: int) -> None:
            mode = "stream" if stream else "plain"
            body = self.body(case, stream)
            key = {"Idempotency-Key": uuid.uuid4().hex}
            label = f"agent-{case.name}-{mode}-{i}"
            async with self.gate:
                await self.send(
                    self.ctx.target,
                    case,
                    body,
                    f"{label}-timeout",
                    deadline_s=deadline,
                    headers=key,
                )
                await self.send(self.ctx.target, case, body, f"{label}-retry", headers=key)

        await asyncio.gather(
            *(pair(s, i) for i in range(self.settings.config.repeat) for s in (True, False))
        )
        after = await self.engine_snapshot("agent-retry-after", settle=True)
        return {"before": before, "after": after}

    async def engine_snapshot(self, window: str, settle: bool) -> str | None:
        """The engine's counters, saved as `metrics/<window>.prom`; `settle` waits (up to
        30 s) until given-up requests are gone, so they are counted as finished (aborted)
        rather than still running. None: no readable scrape."""
        engine = self.ctx.engine
        source = engine or self.ctx.target
        url = engine.url("/metrics") if engine is not None else self.ctx.metrics_url
        for _ in range(30 if settle else 1):
            scraped = await scrape(self.ctx, window, source, url)
            if scraped.snapshot is None:
                return None
            if not scraped.snapshot.value("num_requests_running"):
                return scraped.evidence
            await asyncio.sleep(1.0)
        return scraped.evidence
