"""Every failed request is classified before it counts: a server that refuses a request
class, rate-limits it or answers it with HTTP 500 has a configuration or software defect,
and none of those is the capacity the checklist's "expand capacity" buys. Pure: read from
the saved record lines (`RequestRecordLine`), so `golive decide` classifies the same
records the same way. A failed record is always kept whole in the bundle (`BodySample`), so
its status, the server's words and the request it answered are there to quote.

Stalls and engine deaths are window-level findings (`stalls.py`, the termination record),
not per-request classes.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence

from golive.bundle.request_line import RequestRecordLine
from golive.traffic.records import error_message

QUOTE_CHARS = 200


class FailureClass(enum.StrEnum):
    REFUSED = "refused"  # HTTP 4xx but 429: the server is not configured for the request
    RATE_LIMITED = "rate-limited"  # HTTP 429: a limit in front of the engine
    SERVER_ERROR = "server-error"  # HTTP 5xx
    TRANSPORT = "transport"  # connect, reset, timeout, disconnected mid-answer
    BROKEN_ANSWER = "broken-answer"  # 2xx, but the answer broke the protocol
    CANCELLED = "cancelled"  # golive ended it when its window ran out


def failure_class(line: RequestRecordLine) -> FailureClass | None:
    """The class of one saved record; None when it was answered."""
    status = line.http_status
    kind = None if line.failure is None else line.failure.kind
    if status is not None and status >= 400:
        if status == 429:
            return FailureClass.RATE_LIMITED
        return FailureClass.REFUSED if status < 500 else FailureClass.SERVER_ERROR
    if kind == "cancelled":
        return FailureClass.CANCELLED
    if kind is not None or not (status is not None and 200 <= status < 300):
        return FailureClass.TRANSPORT
    if line.problems:  # as `RequestRecordLine.answered` reads it
        return FailureClass.BROKEN_ANSWER
    return None


def request_class(line: RequestRecordLine) -> str:
    """What kind of request it was, from its body: tool-result, structured, tool-call, text."""
    body = line.request
    if not isinstance(body, Mapping):
        return "request"
    messages = body.get("messages")
    listed = messages if isinstance(messages, list) else []
    roles = {
        role for m in listed if isinstance(m, Mapping) and isinstance(role := m.get("role"), str)
    }
    if "tool" in roles:
        return "tool-result"
    if body.get("response_format") is not None:
        return "structured-output"
    if body.get("tools"):
        return "tool-call"
    return "text"


def failure_quote(line: RequestRecordLine) -> str:
    """The class, status and the server's own words for one failed record."""
    kind = failure_class(line)
    if kind is None:
        return ""
    status = line.http_status
    failure = line.failure
    message = (
        error_message(line.response)
        or ("" if failure is None else failure.message)
        or "; ".join(line.problems)
    )
    http = f" HTTP {status}" if status is not None and status >= 300 else ""
    return f"{kind.value}{http} on a {request_class(line)} request: {clip(message)!r}"


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` cut to `limit` characters at a space, never inside a word: an API key echoed
    by a server is redacted from the bundle as a whole word, and half of one would not be
    (a word longer than the limit is left out whole)."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    cut = max(head.rfind(" "), head.rfind("\n"))
    return (text[:cut].rstrip() if cut > 0 else "") + " …"


def server_errors(lines: Sequence[RequestRecordLine]) -> int:
    """HTTP 5xx answers: the server's own words that it failed, whoever sent too fast."""
    return sum(1 for line in lines if failure_class(line) is FailureClass.SERVER_ERROR)


def cancelled(lines: Sequence[RequestRecordLine]) -> int:
    """Requests golive itself ended when their window (and its drain) ran out."""
    return sum(1 for line in lines if failure_class(line) is FailureClass.CANCELLED)


def failure_detail(lines: Sequence[RequestRecordLine]) -> str:
    """The window's failures, for its finding: the first one quoted, then how many of each
    class and request class ("" when every request was answered). The first is the earliest
    sent, so the records in any order give the same text. Requests golive cancelled at the
    window's end are named only when nothing else failed."""
    failed = [(kind, line) for line in lines if (kind := failure_class(line)) is not None]
    if not failed:
        return ""
    real = [pair for pair in failed if pair[0] is not FailureClass.CANCELLED] or failed
    first = min(real, key=lambda p: (p[1].started_at, p[1].request_id))
    classes = Counter(kind.value for kind, _ in real)
    shapes = Counter(request_class(line) for _, line in real)
    counted = ", ".join(f"{n} {name}" for name, n in sorted(classes.items()))
    on = ", ".join(f"{n} {name}" for name, n in sorted(shapes.items()))
    return f"first: {failure_quote(first[1])}; failed: {counted}; on: {on}"
