"""Chat-completion stream reassembly, on top of the SSE framing (`sse_framing`).

The client keeps the raw chunks of a stream with their arrival times; this runs once the
answer is complete (a capacity window reads each answer as it arrives, so it is on the load's
path; see docs/performance.md). `read_stream` reads a whole answer: the common shape (every
event one `data:` line, LF line ends, valid UTF-8) in one pass, anything else framed by
`decode_events` and folded by `reassemble`, which folds chat-completion chunks into one
message: content, reasoning, tool calls by index, finish reason, usage and any error event
(a `StreamResult`, defined in `stream_result`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from golive.traffic.sse_framing import (
    DONE,
    SSEEvent,
    decode_events,
    decode_events_by_line,
)
from golive.traffic.stream_result import StreamResult, ToolCall

__all__ = [
    "DONE",
    "SSEEvent",
    "decode_events",
    "decode_events_by_line",
    "read_stream",
    "reassemble",
    "token_ids",
]


@dataclass(slots=True)
class _ToolCallParts:
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


# gc=False: decoded chunks hold no cycles, so the collector need not track the thousands
# of them a load window makes
class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[Any] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct, gc=False):
    """The fields of a chat-completion chunk that reassembly reads; a chunk whose fields
    have other types (or that carries `error`) is read by the general path instead."""

    id: str | None = None
    model: str | None = None
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = msgspec.UNSET
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None


_CHUNK = msgspec.json.Decoder(_Chunk)
_DATA_SEPARATOR = "\n\ndata: "


def read_stream(chunks: Sequence[bytes]) -> tuple[StreamResult, str]:
    """A streamed answer's raw reads folded into one `StreamResult`, with any text that
    could not be framed: `reassemble(decode_events(chunks))`, the common shape read whole."""
    whole = _read_whole(chunks)
    if whole is not None:
        return whole, ""
    events, leftover = decode_events(chunks)
    return reassemble(events), leftover


def _read_whole(chunks: Sequence[bytes]) -> StreamResult | None:
    """The common stream in one pass: valid UTF-8, every event one `data: ` line ended by a
    blank line, no CR, every event a typed chunk without `error` but a last `[DONE]`. The
    events are split out at once and decoded without a Python call per event. None, having
    changed nothing, where the stream is not of that shape (the general readers take it)."""
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if not raw.startswith(b"data: ") or not raw.endswith(b"\n\n") or b"\r" in raw:
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    datas = text[6:-2].split(_DATA_SEPARATOR)
    # the separators and the last blank line hold two newlines per event: any other is a
    # line that is not `data: ` (counted per read, for the read each event completed in)
    newlines = [chunk.count(b"\n") for chunk in chunks]
    if sum(newlines) != 2 * len(datas):
        return None
    fold = _Fold()
    events = len(datas)
    if datas[-1] == DONE:
        fold.done = True
        del datas[-1]
    try:
        decoded = list(map(_CHUNK.decode, datas))
    except msgspec.MsgspecError:
        return None
    if not fold.add(zip(decoded, _completing_reads(newlines), strict=False)):
        return None
    return fold.result(events)


def _completing_reads(newlines: list[int]) -> Iterable[int]:
    """The read in which each event of a whole-read stream completed (its blank line's
    second newline), from each read's count of newlines (every newline is one of a pair)."""
    if len(newlines) == 1:
        return itertools.repeat(0)
    reads: list[int] = []
    seen = done = 0
    for index, count in enumerate(newlines):
        seen += count
        reads += [index] * (seen // 2 - done)
        done = seen // 2
    return reads


def reassemble(events: Sequence[SSEEvent]) -> StreamResult:
    """Fold chat-completion chunk events into one `StreamResult` (choice 0 only).

    Each event is decoded as a typed chunk (msgspec: one C pass, no dicts for the fields
    nobody reads); an event that does not fit that shape — not JSON, another type, an
    error — goes through the general path, which reads any JSON as the old code did."""
    fold = _Fold()
    fold.add(_typed(events, fold))
    return fold.result(len(events))


def _typed(events: Sequence[SSEEvent], fold: _Fold) -> Iterator[tuple[_Chunk | SSEEvent, int]]:
    """Each event as a typed chunk, or as itself where the general path must read it
    (`[DONE]` marks the fold done instead)."""
    decode, unset = _CHUNK.decode, msgspec.UNSET
    for event in events:
        data = event.data
        if data == DONE or data.strip() == DONE:
            fold.done = True
            continue
        if event.event == "message":
            try:
                chunk = decode(data)
            except msgspec.MsgspecError:
                pass
            else:
                if chunk.error is unset:
                    yield chunk, event.chunk_index
                    continue
        yield event, event.chunk_index


@dataclass(slots=True)
class _Fold:
    """The parts of one answer as its events arrive."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_keys: list[str] = field(default_factory=list)
    calls: dict[int, _ToolCallParts] = field(default_factory=dict)
    malformed: list[str] = field(default_factory=list)
    token_chunks: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    response_id: str | None = None
    model: str | None = None
    error: Mapping[str, Any] | None = None
    done: bool = False
    prompt_token_ids: tuple[int, ...] | None = None
    prompt_text: str | None = None

    def add(self, items: Iterable[tuple[_Chunk | SSEEvent, int]]) -> bool:
        """Fold typed chunks (each with the read that completed it) and the events the
        general path reads, in order. False, at once, at a typed chunk carrying `error`."""
        unset = msgspec.UNSET
        content, tokens = self.content, self.token_chunks
        for chunk, index in items:
            if not isinstance(chunk, _Chunk):
                self.general(chunk)
                continue
            if chunk.error is not unset:
                return False
            if chunk.usage is not None or not (self.response_id and self.model):
                self.ids(chunk)
            for choice in chunk.choices or ():
                if choice.index != 0:
                    continue
                delta = choice.delta
                if delta is not None:
                    if delta.tool_calls is None and delta.reasoning is None:
                        if delta.reasoning_content is None:  # the common token: text only
                            if delta.content:
                                content.append(delta.content)
                                tokens.append(index)
                        elif self.delta(delta.content, None, delta.reasoning_content, None):
                            tokens.append(index)
                    elif self.delta(
                        delta.content, delta.reasoning, delta.reasoning_content, delta.tool_calls
                    ):
                        tokens.append(index)
                if choice.finish_reason:
                    self.finish_reason = choice.finish_reason
        return True

    def ids(self, chunk: _Chunk) -> None:
        """The response id and model (the first given), the usage (the last given), and
        the prompt the engine rendered (vLLM sends it on the first chunk only)."""
        self.response_id = self.response_id or chunk.id
        self.model = self.model or chunk.model
        if chunk.usage is not None:
            self.usage = chunk.usage
        if self.prompt_token_ids is None and chunk.prompt_token_ids is not None:
            self.prompt_token_ids = tuple(chunk.prompt_token_ids)
        if self.prompt_text is None:
            self.prompt_text = chunk.prompt_text

    def general(self, event: SSEEvent) -> None:
        """Any JSON payload, read field by field with its types checked."""
        try:
            payload = json.loads(event.data)
        except json.JSONDecodeError:
            self.malformed.append(event.data[:200])
            return
        if not isinstance(payload, dict):
            self.malformed.append(event.data[:200])
            return
        if event.event == "error" or "error" in payload:
            raw_error = payload.get("error", payload)
            self.error = raw_error if isinstance(raw_error, dict) else {"message": str(raw_error)}
            return
        # only text: a server's odd `id` or `model` (a number) is not the record's to carry
        if isinstance(payload.get("id"), str):
            self.response_id = self.response_id or payload["id"]
        if isinstance(payload.get("model"), str):
            self.model = self.model or payload["model"]
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        if self.prompt_token_ids is None and "prompt_token_ids" in payload:
            self.prompt_token_ids = token_ids(payload["prompt_token_ids"])
        if self.prompt_text is None and isinstance(payload.get("prompt_text"), str):
            self.prompt_text = payload["prompt_text"]
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            calls = delta.get("tool_calls")
            if self.delta(
                delta.get("content"),
                delta.get("reasoning"),
                delta.get("reasoning_content"),
                calls if isinstance(calls, list) else (),
            ):
                self.token_chunks.append(event.chunk_index)
            if choice.get("finish_reason"):
                self.finish_reason = text_of(choice["finish_reason"])

    def delta(
        self, text: Any, thought: Any, thought_content: Any, calls: Sequence[Any] | None
    ) -> bool:
        """Add one delta to the parts; True when it carried model output (a token)."""
        produced = False
        if isinstance(text, str) and text:
            self.content.append(text)
            produced = True
        for key, value in (("reasoning", thought), ("reasoning_content", thought_content)):
            if isinstance(value, str) and value:
                self.reasoning.append(value)
                if not self.reasoning_keys:
                    self.reasoning_keys.append(key)
                produced = True
                break
        for raw in calls or ():
            at = raw.get("index", 0) if isinstance(raw, dict) else None
            if not isinstance(at, int):
                continue  # not a tool-call delta: the client could not place it either
            parts = self.calls.setdefault(int(at), _ToolCallParts())  # `true` places as 1
            parts.id = parts.id or text_of(raw.get("id"))
            parts.type = parts.type or text_of(raw.get("type"))
            function = raw.get("function")
            if not isinstance(function, dict):
                function = {}
            if function.get("name") and parts.name is None:
                parts.name = str(function["name"])
            if isinstance(function.get("arguments"), str) and function["arguments"]:
                parts.arguments.append(function["arguments"])
            produced = True
        return produced

    def result(self, events: int) -> StreamResult:
        return StreamResult(
            content="".join(self.content),
            reasoning="".join(self.reasoning),
            reasoning_field=self.reasoning_keys[0] if self.reasoning_keys else None,
            tool_calls=tuple(
                ToolCall(i, p.id, p.type, p.name, "".join(p.arguments))
                for i, p in sorted(self.calls.items())
            ),
            finish_reason=self.finish_reason,
            usage=self.usage,
            response_id=self.response_id,
            model=self.model,
            done=self.done,
            error=self.error,
            malformed=tuple(self.malformed),
            chunk_count=events,
            first_token_chunk=self.token_chunks[0] if self.token_chunks else None,
            token_chunks=tuple(self.token_chunks),
            prompt_token_ids=self.prompt_token_ids,
            prompt_text=self.prompt_text,
        )


def text_of(value: Any) -> str | None:
    """A field the answer's types say is text, as text: a server's `"id": 7` or
    `"finish_reason": 1` is kept as its JSON, "7" and "1", so the answer holds the types it
    declares, in this process and in the one a worker hands it to (`worker_wire.to_main`)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def token_ids(value: Any) -> tuple[int, ...] | None:
    """A list of token ids as the engine sent it, or None: not a list of integers."""
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        return None
    return tuple(value)
