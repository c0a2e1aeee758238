"""What a chat-completion stream folds into (`sse.read_stream`, `sse.reassemble`): one
answer, `StreamResult`, with its tool calls, `ToolCall`, and what went wrong on the way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
    prompt_token_ids: tuple[int, ...] | None = None  # vLLM's `return_token_ids` (first chunk)
    prompt_text: str | None = None  # vLLM's `return_prompt_text`: the rendered prompt

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
        completion: dict[str, Any] = {
            "id": self.response_id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": dict(self.usage) if self.usage is not None else None,
        }
        if self.prompt_token_ids is not None:
            completion["prompt_token_ids"] = list(self.prompt_token_ids)
        if self.prompt_text is not None:
            completion["prompt_text"] = self.prompt_text
        return completion
