"""Answers under load equal answers at idle (`capacity.answers_under_load`).

Batching, preemption, KV-cache pressure and numerics bugs change answers, not only latency.
A few prompts with known answers (arithmetic, extraction, a schema-constrained answer, a tool
call with fixed arguments) go at temperature 0 once at idle, before any load, and again
inside the sustained window, in a quarter of its concurrency slots (the window's latency
figures leave them out; below concurrency 4 none is spared and the check is not made).
Correctness against the known answer is the judgement; token-exact agreement with the idle
answer is information (batch variance is legitimate).

Collect: `send_idle` and `ProbeSlots` (in the load window) write `requests/answer-probes.jsonl`
(full bodies, label `probe-<name>-idle` or `probe-<name>-<phase>-c<N>`). Judge:
`judge_answers` reads only those lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from golive.bundle.layout import ANSWER_PROBES_PLAN, CAPACITY_SUSTAINED
from golive.bundle.store import BundleReader
from golive.checks.agent.cases import shipped_tool
from golive.checks.agent.response import message_of
from golive.checks.context import CheckContext
from golive.results import CAPACITY_RESULT, CheckResult, Status
from golive.traffic.records import ParsedResponse, RequestRecord, reparsed

STREAM = "answer-probes"
EVIDENCE = f"requests/{STREAM}.jsonl"
CHECK = "capacity.answers_under_load"
MAX_WRONG = 1  # a probe right at idle and wrong under load more often than this fails


@dataclass(frozen=True, slots=True)
class AnswerProbe:
    """One prompt with a known answer, and how a correct answer reads."""

    name: str
    prompt: str
    expected: Any  # a string in the content, a JSON object, or a call's arguments
    max_tokens: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    def body(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
            "temperature": 0,
            **self.extra,
        }


PROBES = (
    AnswerProbe("arithmetic", "What is 17 + 25? Reply with the number only.", "42", 8),
    AnswerProbe(
        "extraction",
        "Copy the order id from this note and reply with nothing else: "
        "'The customer says order ZX-4471 arrived damaged.'",
        "ZX-4471",
        16,
    ),
    AnswerProbe(
        "schema",
        "Give the weather in Paris, 21 degrees Celsius, as JSON.",
        {"city": "Paris", "temp_c": 21},
        40,
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "weather",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "temp_c": {"type": "integer"},
                        },
                        "required": ["city", "temp_c"],
                        "additionalProperties": False,
                    },
                },
            }
        },
    ),
    AnswerProbe(
        "tool_call",
        "What is the weather in Oslo right now?",
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        64,
        {"tools": [shipped_tool("get_weather")], "tool_choice": "required"},
    ),
)
BY_NAME = {p.name: p for p in PROBES}


def answer_of(parsed: ParsedResponse) -> str:
    """What the answer said, in one line: the content, or the first tool call."""
    message, _ = message_of(parsed)
    calls = message.get("tool_calls") or []
    if calls:
        function = calls[0].get("function") or {}
        return f"{function.get('name')}({function.get('arguments')})"
    return str(message.get("content") or "").strip()


def _fold(value: Any) -> Any:
    """Case and surrounding spaces do not make an answer wrong."""
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, dict):
        return {k: _fold(v) for k, v in value.items()}
    return value


def correct(probe: AnswerProbe, parsed: ParsedResponse) -> bool:
    """Whether an answer is the known one (pure: the same on the live answer and the saved)."""
    message, _ = message_of(parsed)
    if probe.name == "tool_call":
        calls = message.get("tool_calls") or []
        if len(calls) != 1:
            return False
        function = calls[0].get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "")
        except json.JSONDecodeError:
            return False
        want = probe.expected
        return (
            function.get("name") == want["name"]
            and isinstance(arguments, dict)
            and all(_fold(arguments.get(k)) == _fold(v) for k, v in want["arguments"].items())
        )
    content = str(message.get("content") or "")
    if isinstance(probe.expected, dict):
        try:
            data = json.loads(content)
        except json.JSONDecodeError:
            return False
        return isinstance(data, dict) and _fold(data) == _fold(probe.expected)
    words = re.findall(r"[A-Za-z0-9-]+", content)
    return str(probe.expected) in words


async def send_idle(ctx: CheckContext, model: str) -> bool:
    """Each probe once, one at a time, before any load. False (and the rest not sent) when
    one got no answer at all: an engine that does not answer has no reference to give, and
    the load phases judge it."""
    deadline = ctx.config.capacity.probe_deadline_s
    for probe in PROBES:
        label = f"probe-{probe.name}-idle"
        record = await ctx.target.chat(probe.body(model), label, deadline_s=deadline)
        ctx.save(record, STREAM)
        if record.status is None:
            return False
    return True


class ProbeSlots:
    """The probes a load window carries: `body` hands one out in place of the workload's next
    request while fewer than `lanes` are in flight; `send` sends it under its own label and
    saves it in full. The window's figures leave out records whose label starts `probe-`."""

    def __init__(self, ctx: CheckContext, model: str, where: str, repeats: int, lanes: int):
        self._ctx = ctx
        self._where = where
        self._queue = [(p, model) for _ in range(repeats) for p in PROBES]
        self._lanes = max(1, lanes)
        self._in_flight = 0
        self._bodies: dict[int, AnswerProbe] = {}

    @property
    def lanes(self) -> int:
        """Slots of the window the probes may hold at once."""
        return self._lanes

    def body(self) -> dict[str, Any] | None:
        if not self._queue or self._in_flight >= self._lanes:
            return None
        probe, model = self._queue.pop(0)
        body = probe.body(model)
        self._bodies[id(body)] = probe
        self._in_flight += 1
        return body

    def owns(self, body: Mapping[str, Any]) -> bool:
        return id(body) in self._bodies

    async def send(self, body: Mapping[str, Any], scheduled_ns: int) -> RequestRecord:
        probe = self._bodies.pop(id(body))
        try:
            label = f"probe-{probe.name}-{self._where}"
            deadline = self._ctx.config.capacity.probe_deadline_s
            record = await self._ctx.target.chat(body, label, scheduled_ns, deadline)
        finally:
            self._in_flight -= 1
        self._ctx.save(record, STREAM)
        return record


def probe_lanes(concurrency: int) -> int:
    """Slots of a window the probes may hold at once: a quarter of them (none below 4, where
    a probe's slot would change the load the window measures too much)."""
    return concurrency // 4


def is_probe(record: RequestRecord) -> bool:
    return record.label.startswith("probe-")


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    probe: str
    where: str  # "idle", or "<phase>-c<concurrency>"
    answered: bool  # a 2xx answer arrived (failures are capacity's to judge, not wrong)
    correct: bool
    text: str


def _answers(evidence: BundleReader) -> list[ProbeAnswer]:
    out = []
    for line in evidence.records(EVIDENCE):
        match = re.fullmatch(r"probe-([a-z_]+)-(.+)", line.label)
        if match is None or match.group(1) not in BY_NAME:
            continue
        parsed = reparsed(line)
        ok = parsed.record.ok and not parsed.problems
        probe = BY_NAME[match.group(1)]
        out.append(
            ProbeAnswer(
                probe.name,
                match.group(2),
                ok,
                ok and correct(probe, parsed),
                answer_of(parsed)[:120],
            )
        )
    return out


def classify_answers(
    answers: Sequence[ProbeAnswer],
    max_wrong: int = MAX_WRONG,
    plan: Mapping[str, Any] | None = None,
) -> tuple[Status, str, dict[str, Any]]:
    """Correctness under load against correctness at idle, probe by probe. `plan` says where
    the probes were to go under load (`metrics/answer-probes.json`)."""
    idle = {a.probe: a for a in answers if a.where == "idle"}
    loaded = [a for a in answers if a.where != "idle" and a.answered]
    reference = [name for name, a in idle.items() if a.correct]
    measured = {a.probe for a in loaded}
    wrong: dict[str, list[ProbeAnswer]] = {}
    for a in loaded:
        if a.probe in reference and not a.correct:
            wrong.setdefault(a.probe, []).append(a)
    agree = sum(1 for a in loaded if a.probe in idle and a.text == idle[a.probe].text)
    measurements: dict[str, Any] = {
        "probes": len(PROBES),
        "correct_at_idle": len(reference),
        "answers_under_load": len(loaded),
        "wrong_under_load": sum(len(v) for v in wrong.values()),
        "same_text_as_idle": agree,
        "failed_under_load": sum(1 for a in answers if a.where != "idle" and not a.answered),
    }
    if not idle:
        return Status.NO_DATA, "no probe was answered at idle", measurements
    if not reference:
        return (
            Status.NO_DATA,
            "no probe was answered correctly at idle, so none can show an answer changing under "
            f"load (idle answers: {_listing(idle.values())})",
            measurements,
        )
    unmeasured = [name for name in reference if name not in measured]
    if len(unmeasured) == len(reference):
        return (
            Status.NO_DATA,
            "no probe answered correctly at idle was answered under load: the sustained window "
            "ended before they ran (run longer: --duration)",
            measurements,
        )
    if wrong:
        worst = max(wrong.values(), key=len)
        first = worst[0]
        status = Status.FAIL if len(worst) > max_wrong else Status.WARN
        count = sum(1 for a in loaded if a.probe == first.probe)
        return (
            status,
            f"probe {first.probe!r} answered {idle[first.probe].text!r} at idle (correct) and "
            f"{first.text!r} under load ({first.where}), wrong in {len(worst)} of {count} "
            f"answers under load"
            + ("" if status is Status.FAIL else f" (fails above {max_wrong})"),
            measurements,
        )
    checked = sum(1 for a in loaded if a.probe in reference)
    return (
        Status.PASS,
        f"{len(reference)} probe(s) correct at idle stayed correct in {checked} answers "
        f"under load ({agree} word for word as at idle)"
        + (f"; not run under load: {', '.join(unmeasured)}" if unmeasured else ""),
        measurements,
    )


def _listing(answers: Sequence[ProbeAnswer] | Any) -> str:
    return "; ".join(f"{a.probe}: {a.text!r}" for a in answers)


def judge_answers(evidence: BundleReader, critical: bool) -> list[CheckResult]:
    """`capacity.answers_under_load` from `requests/answer-probes.jsonl` alone; none where the
    sustained window was too small to spare a slot (`metrics/answer-probes.json`: below
    concurrency 4 batching hardly changes an answer, and a probe would change the load)."""
    plan = evidence.json(ANSWER_PROBES_PLAN)
    answers = _answers(evidence)
    under_load = [a for a in answers if a.where != "idle"]
    sustained = evidence.json(CAPACITY_SUSTAINED)
    level = sustained.get("concurrency") if isinstance(sustained, Mapping) else None
    none_spared = not isinstance(level, int) or probe_lanes(level) == 0
    if isinstance(plan, Mapping) and plan.get("lanes") == 0 and not under_load and none_spared:
        return []  # (the plan is believed only where the sustained window spared no slot)
    status, summary, measurements = classify_answers(answers)
    return [
        CAPACITY_RESULT(
            CHECK, status, summary, measurements, critical=critical, evidence=(EVIDENCE,)
        )
    ]
