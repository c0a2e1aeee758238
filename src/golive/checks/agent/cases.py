"""The Agent API contract's case set: shipped tool schemas, the cases built on them, and the
user's own schemas (`--schemas FILE`). Pure data; `checks/agent/collect.py` sends them.

Every case states what a client relies on (`Expect`): a call, no call, JSON against a
schema, a truncation the client can notice, or an API that either answers or refuses
clearly. Whether a case is critical (a repeated failure holds the go-live) or names a
feature to disable (a bounded defect, observe-with-limits) comes from the config.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from golive.checks.agent.rules import Expect


class Kind(enum.StrEnum):
    PLAIN = "plain"
    RETRY = "retry"  # the first attempt is given up by a client deadline, then retried


def tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


WEATHER = tool(
    "get_weather",
    "Current weather for one city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "description": "city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
)

TICKET = tool(
    "create_ticket",
    "Open an incident ticket with an owner, labels and reproduction steps.",
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "priority": {"type": "string", "enum": ["p1", "p2", "p3"]},
            "owner": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "team": {"type": "string"}},
                "required": ["name", "team"],
            },
            "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"action": {"type": "string"}, "expected": {"type": "string"}},
                    "required": ["action"],
                },
            },
        },
        "required": ["title", "priority", "owner", "labels"],
    },
)

ORDER = tool(
    "lookup_order",
    "Look up one order by its id.",
    {
        "type": "object",
        "properties": {"order_id": {"type": "string", "minLength": 1}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "service": {"type": "string"},
        "healthy": {"type": "boolean"},
        "error_rate": {"type": "number", "minimum": 0},
        "actions": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["service", "healthy", "error_rate", "actions"],
    "additionalProperties": False,
}

AUTO_FEATURE = "tool_choice=auto (send required or a named tool_choice instead)"

# A schema no model follows unless the server enforces it, for a prompt that asks for prose.
GUIDED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tide_code": {"type": "integer", "const": 7341}},
    "required": ["tide_code"],
    "additionalProperties": False,
}
GUIDED_FEATURE = (
    "the guided_json request field: this server ignores guided_* (removed in vLLM 0.12), so "
    "clients using it get unconstrained output; send response_format (json_schema) instead"
)
SYSTEM = "You are an operations agent. Use the tools when they help; be brief."


def named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


@dataclass(frozen=True, slots=True)
class AgentCase:
    name: str
    proves: str  # one sentence: the promise a client relies on
    expect: Expect
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    response_format: Mapping[str, Any] | None = None
    max_tokens: int | None = None  # None: the config's agent.max_tokens
    kind: Kind = Kind.PLAIN
    critical: bool = True
    feature: str = ""  # what to disable or rate-limit when this (non-critical) case fails
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tool_schemas(self) -> dict[str, Mapping[str, Any]]:
        return {t["function"]["name"]: t["function"].get("parameters") or {} for t in self.tools}

    @property
    def json_schema(self) -> Mapping[str, Any] | None:
        """The schema the answer must follow: response_format's, or the legacy guided_json."""
        if self.response_format is None:
            guided = self.extra.get("guided_json")
            return guided if isinstance(guided, Mapping) else None
        schema: Mapping[str, Any] = self.response_format["json_schema"]["schema"]
        return schema

    def body(self, model: str, stream: bool, max_tokens: int, temperature: float) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in self.messages],
            "max_tokens": self.max_tokens or max_tokens,
            "temperature": temperature,
            **copy.deepcopy(dict(self.extra)),
        }
        if self.tools:
            body["tools"] = copy.deepcopy(list(self.tools))
        if self.tool_choice is not None:
            body["tool_choice"] = copy.deepcopy(self.tool_choice)
        if self.response_format is not None:
            body["response_format"] = copy.deepcopy(dict(self.response_format))
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body


def _weather_ask() -> tuple[Mapping[str, Any], ...]:
    return (
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is the weather in Lisbon right now?"},
    )


def shipped_cases() -> tuple[AgentCase, ...]:
    """The fixed case set, in the order they run."""
    weather_result = (
        *_weather_ask(),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call("call_w1", "get_weather", '{"city": "Lisbon"}')],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"temp_c": 19, "sky": "clear"}'},
    )
    ticket_ask = (
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Checkout returns HTTP 502 since the 14:00 deploy. Open a p1 ticket "
            "for Ana from the payments team, label it checkout and deploy, with the steps "
            "to reproduce.",
        },
    )
    return (
        AgentCase(
            "one_arg.required",
            "tool_choice=required yields a call whose arguments satisfy the schema",
            Expect.CALL,
            _weather_ask(),
            (WEATHER,),
            "required",
        ),
        AgentCase(
            "one_arg.named",
            "a named tool_choice yields exactly that call with valid arguments",
            Expect.CALL,
            _weather_ask(),
            (WEATHER, ORDER),
            named("get_weather"),
        ),
        AgentCase(
            "one_arg.auto",
            "tool_choice=auto: the model's own call format is parsed into tool_calls",
            Expect.CALL,
            _weather_ask(),
            (WEATHER,),
            "auto",
            critical=False,
            feature=AUTO_FEATURE,
        ),
        AgentCase(
            "nested.required",
            "nested objects and arrays in arguments satisfy the schema",
            Expect.CALL,
            ticket_ask,
            (TICKET,),
            "required",
        ),
        AgentCase(
            "tool_result",
            "after a tool result the answer is text, not another call",
            Expect.NO_CALL,
            weather_result,
            (WEATHER,),
            "auto",
            critical=False,
            feature=AUTO_FEATURE,
        ),
        AgentCase(
            "no_call",
            "a request that needs no tool gets text, not a call",
            Expect.NO_CALL,
            (
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Say hello to the on-call team in one sentence."},
            ),
            (WEATHER, ORDER),
            "auto",
        ),
        AgentCase(
            "incomplete_args",
            "arguments cut by max_tokens are flagged (finish_reason length), so a client can "
            "notice before executing them",
            Expect.INCOMPLETE,
            ticket_ask,
            (TICKET,),
            "required",
            max_tokens=8,
            critical=False,
            feature="long tool arguments (raise max_tokens; refuse calls with finish_reason "
            "length)",
        ),
        AgentCase(
            "invalid_args",
            "a history carrying unparsable arguments is answered or refused with a clear 4xx, "
            "never a 5xx",
            Expect.ANSWER_OR_REFUSE,
            (
                *_weather_ask(),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call("call_w1", "get_weather", '{"city": "Lis')],
                },
                {"role": "tool", "tool_call_id": "call_w1", "content": '{"error": "bad args"}'},
            ),
            (WEATHER,),
            "auto",
            critical=False,
            feature="replaying malformed tool calls in conversation history",
        ),
        AgentCase(
            "structured",
            "response_format json_schema output validates against the schema",
            Expect.JSON,
            (
                {"role": "system", "content": "Answer only with JSON."},
                {
                    "role": "user",
                    "content": "Report the status of the checkout service as JSON: it has 2% "
                    "errors since the deploy, so it is not healthy; list two actions.",
                },
            ),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "status", "strict": True, "schema": ANSWER_SCHEMA},
            },
        ),
        AgentCase(
            "guided_json",
            "a schema in the deprecated guided_json field constrains the answer, as it did "
            "before vLLM 0.12 (a newer server ignores the field and answers unconstrained)",
            Expect.JSON,
            (
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Describe the sea at night in two sentences."},
            ),
            critical=False,
            feature=GUIDED_FEATURE,
            extra={"guided_json": GUIDED_SCHEMA},
        ),
        AgentCase(
            "retry",
            "a client timeout then a retry never hands the client two calls to execute",
            Expect.CALL,
            _weather_ask(),
            (WEATHER,),
            "required",
            kind=Kind.RETRY,
        ),
        AgentCase(
            "multi_turn",
            "a conversation carrying earlier tool results still yields a valid next call",
            Expect.CALL,
            (
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Where is order A-17?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call("call_o1", "lookup_order", '{"order_id": "A-17"}')],
                },
                {"role": "tool", "tool_call_id": "call_o1", "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": "Order A-17 has shipped."},
                {"role": "user", "content": "And order B-7? Also the weather in Porto."},
            ),
            (ORDER, WEATHER),
            "required",
        ),
    )
