"""Server-Sent-Events framing: a stream's raw reads into events, each with the read that
completed it (so first-token time can be read off afterwards). Tolerates lines split across
reads, CRLF, comments and multi-line data; streams with LF line ends (what vLLM sends) are
framed by whole events, any CR takes the line-by-line reading of the SSE spec.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

DONE = "[DONE]"


class SSEEvent(NamedTuple):
    """One dispatched event: its `event:` name, joined `data:` lines and completing chunk (a
    tuple: a long stream makes thousands of them, and a tuple is the cheapest to make)."""

    data: str
    event: str = "message"
    chunk_index: int = 0


def decode_events(chunks: Iterable[bytes]) -> tuple[list[SSEEvent], str]:
    """Decode an SSE byte stream into events; also return any unterminated trailing text.

    A trailing event without its blank-line terminator is still returned (servers that close
    the connection right after the last `data:` line exist), and the leftover text is what
    could not be framed at all. Streams with LF line ends (what vLLM sends) are framed by
    whole events; any CR in the stream takes the line-by-line reading of the SSE spec.
    """
    chunks = tuple(chunks)
    if any(b"\r" in chunk for chunk in chunks):
        return decode_events_by_line(chunks)
    framer = _Framer()
    buffer = b""
    index = -1
    for index, chunk in enumerate(chunks):
        buffer += chunk
        if b"\n\n" not in buffer:
            continue
        *blocks, buffer = buffer.split(b"\n\n")
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:  # one data line
                framer.events.append(
                    SSEEvent(block[6:].decode("utf-8", "replace"), "message", index)
                )
                continue
            for raw in block.split(b"\n"):
                framer.line(raw, index)
            framer.line(b"", index)
    *lines, tail = buffer.split(b"\n")
    for raw in lines:
        framer.line(raw, index)
    return framer.finish(tail, index)


def decode_events_by_line(chunks: Iterable[bytes]) -> tuple[list[SSEEvent], str]:
    """`decode_events` line by line, as the SSE spec reads it (CR, LF or CRLF line ends)."""
    framer = _Framer()
    buffer = b""
    index = -1
    for index, chunk in enumerate(chunks):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            framer.line(raw, index)
    return framer.finish(buffer, index)


@dataclass(slots=True)
class _Framer:
    """The SSE event state machine: `data:` lines gather until a blank line dispatches them."""

    events: list[SSEEvent] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # data lines of the event being read
    event_name: str = "message"

    def line(self, raw: bytes, index: int) -> None:
        line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
        if not line:
            if self.pending:
                self.events.append(SSEEvent("\n".join(self.pending), self.event_name, index))
            self.pending, self.event_name = [], "message"
            return
        name, value = _field(line)
        if name == "data":
            self.pending.append(value)
        elif name == "event":
            self.event_name = value or "message"

    def finish(self, buffer: bytes, index: int) -> tuple[list[SSEEvent], str]:
        """The events, with a trailing `data:` line and an undispatched event kept."""
        tail = buffer.decode("utf-8", errors="replace").rstrip("\r")
        if tail:
            name, value = _field(tail)
            if name == "data":
                self.pending.append(value)
                tail = ""
        if self.pending:
            self.events.append(SSEEvent("\n".join(self.pending), self.event_name, max(index, 0)))
        return self.events, tail


def _field(line: str) -> tuple[str, str]:
    if line.startswith(":"):
        return "", ""
    name, sep, value = line.partition(":")
    if not sep:
        return name, ""
    return name, value[1:] if value.startswith(" ") else value
