"""Pure Server-Sent-Events decoding and chat-completion stream reassembly.

The client keeps the raw chunks of a stream with their arrival times; everything here runs
after the fact, so the hot path does no parsing. `decode_events` turns chunks into events
(tolerating lines split across chunks, CRLF, comments and multi-line data) and remembers in
which chunk each event completed, so first-token time can be read off afterwards.
`reassemble` folds chat-completion chunks into one message: content, reasoning, tool calls
by index, finish reason, usage and any error event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its `event:` name, joined `data:` lines and completing chunk."""

    data: str
    event: str = "message"
    chunk_index: int = 0


def decode_events(chunks: Iterable[bytes]) -> tuple[list[SSEEvent], str]:
    """Decode an SSE byte stream into events; also return any unterminated trailing text.

    A trailing event without its blank-line terminator is still returned (servers that close
    the connection right after the last `data:` line exist), and the leftover text is what
    could not be framed at all.
    """
    events: list[SSEEvent] = []
    buffer = b""
    data_lines: list[str] = []
    event_name = "message"
    index = -1
    for index, chunk in enumerate(chunks):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if data_lines:
                    events.append(SSEEvent("\n".join(data_lines), event_name, index))
                data_lines, event_name = [], "message"
                continue
            name, value = _field(line)
            if name == "data":
                data_lines.append(value)
            elif name == "event":
                event_name = value or "message"
    tail = buffer.decode("utf-8", errors="replace").rstrip("\r")
    if tail:
        name, value = _field(tail)
        if name == "data":
            data_lines.append(value)
            tail = ""
    if data_lines:
        events.append(SSEEvent("\n".join(data_lines), event_name, max(index, 0)))
    return events, tail


def _field(line: str) -> tuple[str, str]:
    if line.startswith(":"):
        return "", ""
    name, sep, value = line.partition(":")
    if not sep:
        return name, ""
    return name, value[1:] if value.startswith(" ") else value


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A reassembled tool call: arguments is the concatenated string the server sent."""

    index: int
    id: str | None
    type: str | None
    name: str | None
    arguments: str

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class StreamResult:
    """A chat-completion stream folded into one answer, with what went wrong on the way."""

    content: str = ""
    reasoning: str = ""
    reasoning_field: str | None = None  # the delta key the server wrote reasoning in
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None
    done: bool = False
    error: Mapping[str, Any] | None = None
    malformed: tuple[str, ...] = ()
    chunk_count: int = 0
    first_token_chunk: int | None = None
    token_chunks: tuple[int, ...] = field(default=())

    @property
    def truncated(self) -> bool:
        """The stream ended without `[DONE]` and without an error event."""
        return not self.done and self.error is None

    def as_completion(self) -> dict[str, Any]:
        """The answer in the non-streaming `chat.completion` shape, for saving and comparing."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            message[self.reasoning_field or "reasoning"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [call.to_json() for call in self.tool_calls]
        return {
            "id": self.response_id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": dict(self.usage) if self.usage is not None else None,
        }


@dataclass(slots=True)
class _ToolCallParts:
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


def reassemble(events: Sequence[SSEEvent]) -> StreamResult:
    """Fold chat-completion chunk events into one `StreamResult` (choice 0 only)."""
    content: list[str] = []
    reasoning: list[str] = []
    reasoning_keys: list[str] = []
    calls: dict[int, _ToolCallParts] = {}
    malformed: list[str] = []
    token_chunks: list[int] = []
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None
    error: Mapping[str, Any] | None = None
    done = False
    for event in events:
        if event.data.strip() == DONE:
            done = True
            continue
        try:
            payload = json.loads(event.data)
        except json.JSONDecodeError:
            malformed.append(event.data[:200])
            continue
        if not isinstance(payload, dict):
            malformed.append(event.data[:200])
            continue
        if event.event == "error" or "error" in payload:
            raw_error = payload.get("error", payload)
            error = raw_error if isinstance(raw_error, dict) else {"message": str(raw_error)}
            continue
        response_id = response_id or payload.get("id")
        model = model or payload.get("model")
        if isinstance(payload.get("usage"), dict):
            usage = payload["usage"]
        for choice in payload.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if _fold_delta(delta, content, reasoning, calls, reasoning_keys):
                token_chunks.append(event.chunk_index)
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    return StreamResult(
        content="".join(content),
        reasoning="".join(reasoning),
        reasoning_field=reasoning_keys[0] if reasoning_keys else None,
        tool_calls=tuple(
            ToolCall(i, p.id, p.type, p.name, "".join(p.arguments))
            for i, p in sorted(calls.items())
        ),
        finish_reason=finish_reason,
        usage=usage,
        response_id=response_id,
        model=model,
        done=done,
        error=error,
        malformed=tuple(malformed),
        chunk_count=len(events),
        first_token_chunk=token_chunks[0] if token_chunks else None,
        token_chunks=tuple(token_chunks),
    )


def _fold_delta(
    delta: Mapping[str, Any],
    content: list[str],
    reasoning: list[str],
    calls: dict[int, _ToolCallParts],
    reasoning_keys: list[str],
) -> bool:
    """Add one delta to the parts; True when it carried model output (a token)."""
    produced = False
    text = delta.get("content")
    if isinstance(text, str) and text:
        content.append(text)
        produced = True
    for key in ("reasoning", "reasoning_content"):
        thought = delta.get(key)
        if isinstance(thought, str) and thought:
            reasoning.append(thought)
            if not reasoning_keys:
                reasoning_keys.append(key)
            produced = True
            break
    for raw in delta.get("tool_calls") or ():
        if not isinstance(raw, dict):
            continue
        parts = calls.setdefault(int(raw.get("index", 0)), _ToolCallParts())
        parts.id = parts.id or raw.get("id")
        parts.type = parts.type or raw.get("type")
        function = raw.get("function") or {}
        if function.get("name") and parts.name is None:
            parts.name = str(function["name"])
        if isinstance(function.get("arguments"), str) and function["arguments"]:
            parts.arguments.append(function["arguments"])
        produced = True
    return produced
