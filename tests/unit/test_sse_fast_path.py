"""The fast paths of SSE reading (framing by whole events, typed chunk decoding) give exactly
what the general readers give, on real vLLM streams, on streams cut anywhere and on
chat-completion chunks whose fields have any JSON type."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golive.traffic.sse import (
    DONE,
    SSEEvent,
    _read_whole,
    _ToolCallParts,
    decode_events,
    decode_events_by_line,
    read_stream,
    reassemble,
)
from golive.traffic.stream_result import StreamResult, ToolCall
from tests.unit.test_fuzz import FUZZ, JSON

DATA = Path(__file__).parents[1] / "data"
REAL = sorted(DATA.rglob("*.txt"))


def oracle_reassemble(events: Sequence[SSEEvent]) -> StreamResult:
    """The reassembly before the typed fast path (dicts from json.loads for every event), kept
    as the oracle; where it crashed (choices, a delta or a tool call that is not what the API
    says), that part reads as absent, as the general path now reads it."""
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
        # only text is carried: a number where the id or model should be is not the record's
        if isinstance(payload.get("id"), str):
            response_id = response_id or payload["id"]
        if isinstance(payload.get("model"), str):
            model = model or payload["model"]
        if isinstance(payload.get("usage"), dict):
            usage = payload["usage"]
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
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
    listed = delta.get("tool_calls")
    for raw in listed if isinstance(listed, list) else ():
        at = raw.get("index", 0) if isinstance(raw, dict) else None
        if not isinstance(at, int):
            continue
        parts = calls.setdefault(at, _ToolCallParts())
        parts.id = parts.id or raw.get("id")
        parts.type = parts.type or raw.get("type")
        function = raw.get("function")
        if not isinstance(function, dict):
            function = {}
        if function.get("name") and parts.name is None:
            parts.name = str(function["name"])
        if isinstance(function.get("arguments"), str) and function["arguments"]:
            parts.arguments.append(function["arguments"])
        produced = True
    return produced


def _cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


FIELD = st.sampled_from([b"data: ", b"data:", b"event: error", b"event:", b": ping", b"id: 1"])
TEXT = st.sampled_from([b"x", b"{}", b'{"a":1}', b" ", b"\xe2\x82", b"\xac", b"[DONE]", b"\n"])


@FUZZ
@given(
    st.lists(st.tuples(FIELD, st.lists(TEXT, max_size=3), st.integers(0, 2))),
    st.lists(st.integers(0, 10**6), max_size=6),
)
def test_framing_by_events_equals_framing_by_lines(
    lines: list[tuple[bytes, list[bytes], int]], cuts: list[int]
) -> None:
    """Any LF stream of SSE fields, cut into reads anywhere: the same events, chunk indexes
    and leftover as the line-by-line reader."""
    raw = b"".join(name + b"".join(value) + b"\n" * ends for name, value, ends in lines)
    chunks = _cut(raw, cuts)
    assert decode_events(chunks) == decode_events_by_line(chunks)


def test_real_streams_read_the_same_by_both_paths() -> None:
    """Every captured vLLM stream in tests/data, read whole and one byte at a time."""
    streams = [p for p in REAL if p.read_bytes().startswith(b"data:")]
    assert streams
    for path in streams:
        raw = path.read_bytes()
        for chunks in ([raw], [raw[i : i + 1] for i in range(len(raw))]):
            events, _ = decode_events(chunks)
            assert (events, _) == decode_events_by_line(chunks), path
            assert reassemble(events) == oracle_reassemble(events), path


DELTA = st.fixed_dictionaries(
    {},
    optional={
        "content": st.one_of(st.text(max_size=5), JSON),
        "reasoning": st.one_of(st.text(max_size=5), JSON),
        "reasoning_content": st.one_of(st.text(max_size=5), JSON),
        "tool_calls": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "index": st.one_of(st.integers(0, 2), JSON),
                        "id": JSON,
                        "function": st.one_of(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "name": JSON,
                                    "arguments": st.one_of(st.text(max_size=5), JSON),
                                },
                            ),
                            JSON,
                        ),
                    },
                ),
                max_size=2,
            ),
            JSON,
        ),
    },
)
CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "index": st.one_of(st.just(0), st.integers(0, 2), JSON),
        "delta": st.one_of(DELTA, JSON),
        "finish_reason": st.one_of(st.sampled_from(["stop", "length", "tool_calls"]), JSON),
    },
)
CHUNK = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.just("chatcmpl-1"), JSON),
        "model": st.one_of(st.just("m"), JSON),
        "choices": st.one_of(st.lists(CHOICE, max_size=2), JSON),
        "usage": st.one_of(st.fixed_dictionaries({"prompt_tokens": st.integers(0, 9)}), JSON),
        "error": JSON,
    },
)


@FUZZ
@given(
    st.lists(st.one_of(CHUNK.map(json.dumps), st.just(DONE), st.text(max_size=8)), max_size=8),
    st.lists(st.sampled_from(["message", "error", "ping"]), min_size=8, max_size=8),
)
def test_typed_reassembly_equals_the_general_reading(datas: list[str], names: list[str]) -> None:
    """Chunks whose fields have any JSON type, error events and non-JSON data fold into the
    same answer, token positions included, as reading every event as a dict does."""
    events = [SSEEvent(d, names[i], i) for i, d in enumerate(datas)]
    assert reassemble(events) == oracle_reassemble(events)


def _framed_then_folded(chunks: list[bytes]) -> tuple[StreamResult, str]:
    """The general reading of a whole answer: framed event by event, then folded."""
    events, leftover = decode_events(chunks)
    return reassemble(events), leftover


# what a `data:` line may carry, near the common shape and just off it: typed chunks, a chunk
# with an error, `[DONE]`, JSON spread over two lines, not JSON, bytes that are not UTF-8
PAYLOAD = st.one_of(
    CHUNK.map(lambda c: json.dumps(c).encode()),
    CHUNK.map(lambda c: json.dumps(c, ensure_ascii=False).encode()),
    st.sampled_from(
        [
            b"[DONE]",
            b" [DONE] ",
            b'{"choices":\n[]}',
            b'{"choices":[{"delta":{"content":"\xe2\x82"}}]}',
            b'{"error":{"message":"overloaded"}}',
            b"x",
            b"",
        ]
    ),
)
LINE_START = st.sampled_from([b"data: ", b"data: ", b"data: ", b"data:", b"event: error\ndata: "])
LINE_END = st.sampled_from([b"\n\n", b"\n\n", b"\n\n", b"\n", b"\r\n\r\n", b"\n\n\n", b""])


@FUZZ
@given(
    st.lists(st.tuples(LINE_START, PAYLOAD, LINE_END), max_size=8),
    st.booleans(),
    st.lists(st.integers(0, 10**6), max_size=6),
)
def test_whole_stream_reading_equals_framing_then_folding(
    events: list[tuple[bytes, bytes, bytes]], done: bool, cuts: list[int]
) -> None:
    """A streamed answer read in one pass (the common shape: one `data: ` line per event, LF,
    UTF-8, typed chunks, a last [DONE]) gives the same answer, token reads included, and the
    same unframed text as framing it event by event and folding the events, for streams of
    that shape and streams just off it, cut into reads anywhere."""
    raw = b"".join(start + payload + end for start, payload, end in events)
    if done:
        raw += b"data: [DONE]\n\n"
    chunks = _cut(raw, cuts)
    assert read_stream(chunks) == _framed_then_folded(chunks)


def test_common_stream_read_whole_keeps_each_token_read() -> None:
    """A vLLM-shaped answer split over reads at every byte: each token counted in the read
    that completed its event, as the event-by-event reading counts it."""
    events = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": word}}]}
        for word in ("a", " b", " c")
    ]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    raw += b"data: [DONE]\n\n"
    for at in range(len(raw) + 1):
        for chunks in ([raw[:at], raw[at:]], [raw[i : i + 1] for i in range(len(raw))]):
            stream, leftover = read_stream(chunks)
            assert (stream, leftover) == _framed_then_folded(chunks)
            assert _read_whole(chunks) == stream  # the one-pass reading took it
            assert stream.content == "a b c"


TOKEN = b'data: {"id":"c","choices":[{"delta":{"content":"a"}}]}\n\n'


@pytest.mark.parametrize(
    "raw",
    [
        TOKEN + b'data: {"choices":\n[{"delta":{"content":"b"}}]}\n\ndata: [DONE]\n\n',
        TOKEN + b'data:{"choices":[{"delta":{"content":"b"}}]}\n\ndata: [DONE]\n\n',
        TOKEN + b'data: {"choices":[{"delta":{"content":"b"}}]}\r\n\r\ndata: [DONE]\n\n',
        TOKEN + b'data: {"choices":[{"delta":{"content":"\xe2\x82"}}]}\n\ndata: [DONE]\n\n',
        TOKEN + b"data: [DONE]\n\n" + TOKEN,
        TOKEN + b'data: {"error":{"message":"overloaded"}}\n\ndata: [DONE]\n\n',
        TOKEN + b'event: ping\ndata: {"choices":[]}\n\ndata: [DONE]\n\n',
        TOKEN + b"data: [DONE]\n",
    ],
)
def test_streams_off_the_common_shape_read_as_framed_then_folded(raw: bytes) -> None:
    """A stream just off the common shape (JSON over two lines, `data:` without its space,
    CRLF, bytes that are not UTF-8, an event after [DONE], an error chunk, a named event, no
    last blank line) is read event by event: the same answer and leftover as framing it and
    folding its events."""
    assert _read_whole([raw]) is None
    assert read_stream([raw]) == _framed_then_folded([raw])


def test_real_streams_read_whole_as_framed_then_folded() -> None:
    """Every captured vLLM stream in tests/data, read whole, in two reads and byte by byte,
    gives what framing and folding it gives."""
    streams = [p for p in REAL if p.read_bytes().startswith(b"data:")]
    assert streams
    for path in streams:
        raw = path.read_bytes()
        half = len(raw) // 2
        for chunks in ([raw], [raw[:half], raw[half:]], [raw[i : i + 1] for i in range(len(raw))]):
            assert read_stream(chunks) == _framed_then_folded(chunks), path
