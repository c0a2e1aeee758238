"""The Agent API contract's case set: shipped tool schemas and the cases built on them
(`cases.yaml`, beside this module), and the user's own schemas (`--schemas FILE`). Pure data;
`checks/agent/collect.py` sends them.

Every case states what a client relies on (`Expect`): a call, no call, JSON against a
schema, a truncation the client can notice, or an API that either answers or refuses
clearly. Whether a case is critical (a repeated failure holds the go-live) or names a
feature to disable (a bounded defect, observe-with-limits) comes from the config.
"""

from __future__ import annotations

import copy
import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pydantic import Field

from golive.checks.agent.rules import Expect
from golive.strict_model import StrictModel
from golive.yaml_input import parse_yaml, validated

CASES_FILE = "cases.yaml"


class Kind(enum.StrEnum):
    PLAIN = "plain"
    RETRY = "retry"  # the first attempt is given up by a client deadline, then retried


def tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


def named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


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


class _ToolEntry(StrictModel):
    description: str
    parameters: dict[str, Any]


class _CaseEntry(StrictModel):
    name: str
    proves: str
    expect: Expect
    conversation: str | None = None  # one of the file's `conversations`, then `then`
    then: tuple[dict[str, Any], ...] = ()
    tools: tuple[str, ...] = ()
    tool_choice: str | None = None
    named_tool: str | None = None  # a named tool_choice
    response_format: dict[str, Any] | None = None
    max_tokens: int | None = None
    kind: Kind = Kind.PLAIN
    critical: bool = True
    feature: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class _CaseFile(StrictModel):
    system: str
    features: dict[str, str]
    tools: dict[str, _ToolEntry]
    conversations: dict[str, tuple[dict[str, Any], ...]]
    cases: tuple[_CaseEntry, ...]


@functools.cache
def _case_file() -> _CaseFile:
    source = f"golive/checks/agent/{CASES_FILE}"
    text = resources.files("golive.checks.agent").joinpath(CASES_FILE).read_text()
    return validated(_CaseFile, parse_yaml(text, source), source)


def shipped_tool(name: str) -> dict[str, Any]:
    """One shipped tool schema, as a request's `tools` entry."""
    entry = _case_file().tools[name]
    return tool(name, entry.description, copy.deepcopy(entry.parameters))


def system_prompt() -> str:
    """The shipped cases' operations-agent system prompt."""
    return _case_file().system


def _case(entry: _CaseEntry, data: _CaseFile) -> AgentCase:
    opening = data.conversations[entry.conversation] if entry.conversation else ()
    choice = named(entry.named_tool) if entry.named_tool else entry.tool_choice
    return AgentCase(
        entry.name,
        entry.proves,
        entry.expect,
        copy.deepcopy((*opening, *entry.then)),
        tuple(shipped_tool(name) for name in entry.tools),
        choice,
        copy.deepcopy(entry.response_format),
        entry.max_tokens,
        entry.kind,
        entry.critical,
        entry.feature,
        copy.deepcopy(entry.extra),
    )


def shipped_cases() -> tuple[AgentCase, ...]:
    """The fixed case set, in the order they run (`cases.yaml`)."""
    data = _case_file()
    return tuple(_case(entry, data) for entry in data.cases)
