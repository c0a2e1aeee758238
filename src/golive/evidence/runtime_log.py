"""The server's log while golive's requests ran: errors attributed to the checks whose
requests were in flight when they were logged (issue 17 §5).

vLLM logs `LEVEL MM-DD HH:MM:SS [file.py:line] message` in the server's local time, to the
second. A logged error corroborates a failing check's layer (a tool parser's traceback under
an Agent case says the parser, not the model, broke); it never changes a status by itself.
Pure: the log text and the request spans in, the attribution out.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from golive.bundle.layout import AFTER_LOAD_PROBE, SERVER_LOG, SERVER_LOG_ERRORS
from golive.bundle.request_line import decode_line
from golive.bundle.store import Bundle, read_lines, record_streams
from golive.errors import RecordLineError
from golive.evidence.startup_log import parse_startup_log
from golive.results import CheckResult

_LINE = re.compile(
    r"^(?:\((?P<proc>[^)]*?)\)\s+)?(?P<level>ERROR|CRITICAL)\s+"
    r"(?P<stamp>\d\d-\d\d\s+\d\d:\d\d:\d\d)(?:[.,]\d+)?\s+\[(?P<source>[^\]]*)\]\s?(?P<msg>.*)$"
)
LOGGED_ERRORS = "server_log_errors"  # the measurement `with_logged_errors` adds to a check
SLACK_S = 1.0  # the log's stamps are whole seconds: an error stamped S happened in [S, S+1)
PARSER_SOURCE = re.compile(r"tool_parser|reasoning|parser\.py")  # blames tool-parsing requests


@dataclass(frozen=True, slots=True)
class LoggedError:
    """One error the server logged after it was ready; a traceback is one error."""

    line: int
    at: float | None  # epoch seconds; None where the stamp does not parse
    source: str  # file.py:line as vLLM names it
    message: str
    exception: str | None  # the traceback's last line, where there is one

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "at": self.at,
            "source": self.source,
            "message": self.message,
            "exception": self.exception,
        }


Attributed = tuple[LoggedError, tuple[str, ...], tuple[str, ...]]  # error, checks, labels
MAX_ERRORS = 500  # attributed one by one; beyond them only counted


@dataclass(frozen=True, slots=True)
class Span:
    """One request: the stream it was saved in, its label, when it was in flight."""

    stream: str
    label: str
    start: float
    end: float
    parses_tools: bool = True  # carried tools the server's tool parser reads (not tool_choice none)


def runtime_errors(text: str, year: int, zone: tzinfo | None) -> list[LoggedError]:
    """ERROR/CRITICAL lines after the server's ready line (all of them when the log has
    none), consecutive lines of one traceback joined. Stamps are read as `zone` local time
    of `year` (the run's), which is the server's zone when it runs on this host."""
    ready = parse_startup_log(text).ready_line or 0
    found: list[LoggedError] = []
    key: tuple[str, str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if number <= ready:
            continue
        match = _LINE.match(raw)
        if match is None:
            key = None
            continue
        this = (match["proc"] or "", match["stamp"], match["source"])
        msg = match["msg"].rstrip()
        if this == key and found:
            last = found[-1]
            if msg and not msg[0].isspace() and not msg.startswith("Traceback"):
                found[-1] = LoggedError(last.line, last.at, last.source, last.message, msg)
            continue
        key = this
        found.append(LoggedError(number, _epoch(match["stamp"], year, zone), this[2], msg, None))
    return found


def _epoch(stamp: str, year: int, zone: tzinfo | None) -> float | None:
    try:
        moment = datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return moment.replace(tzinfo=zone).timestamp() if zone else moment.astimezone().timestamp()


def check_of(stream: str, label: str = "") -> str | None:
    """The check a request stream's records (and, within a stream, a labelled request)
    belong to."""
    if label == AFTER_LOAD_PROBE:  # the probe after the sustained window (cache.after_load)
        return "cache.after_load"
    if stream.startswith("agent.") and stream not in ("agent.setup", "agent-failures"):
        return stream.removesuffix(".engine")
    if stream.startswith("capacity-"):
        phase = stream.removeprefix("capacity-")
        return f"capacity.{phase}" if phase in ("long_input", "concurrency", "sustained") else None
    return {"cache": "cache.prefix_reuse", "smoke-sustained": "smoke.sustained"}.get(stream)


def attribute(errors: Sequence[LoggedError], spans: Iterable[Span]) -> list[Attributed]:
    """Each error (the first MAX_ERRORS) with the checks and the request labels in flight when
    it was logged."""
    ordered = sorted(spans, key=lambda s: s.start)
    out: list[Attributed] = []
    for error in errors[:MAX_ERRORS]:
        if error.at is None:
            out.append((error, (), ()))
            continue
        parser = PARSER_SOURCE.search(error.source) is not None
        live = [
            s
            for s in ordered
            if s.start < error.at + SLACK_S and s.end >= error.at and (s.parses_tools or not parser)
        ]
        checks = tuple(sorted({c for s in live if (c := check_of(s.stream, s.label)) is not None}))
        out.append((error, checks, tuple(s.label for s in live[:20])))
    return out


def by_check(
    attributed: Sequence[Attributed],
) -> Mapping[str, list[LoggedError]]:
    found: dict[str, list[LoggedError]] = {}
    for error, checks, _ in attributed:
        for check in checks:
            found.setdefault(check, []).append(error)
    return found


def corroboration(errors: Sequence[LoggedError]) -> str:
    """The sentence a check's summary gains: how many errors, from where, what they said."""
    sources: dict[str, int] = {}
    for error in errors:
        sources[error.source] = sources.get(error.source, 0) + 1
    first = errors[0]
    said = first.exception or first.message
    where = ", ".join(f"{source} ×{n}" for source, n in sorted(sources.items()))
    return (
        f"; the server logged {len(errors)} error(s) while these requests were in flight "
        f"({where}; first: {said[:160]!r}, environment/server.log:{first.line})"
    )


def request_spans(root: Path) -> list[Span]:
    """Every saved request's span, from the bundle's record streams (I/O)."""
    spans = []
    for path in record_streams(root):
        stream = path.name.split(".jsonl")[0]
        for number, line in enumerate(read_lines(path), start=1):
            try:  # a line that does not read as a record is the ledger's finding, not a span
                row = decode_line(line, f"{path.name} line {number}")
            except RecordLineError:
                continue
            start, end_ms = row.started_at, row.timings_ms.end
            end = start + (end_ms / 1000 if end_ms is not None else 0.0)
            request = row.request or {}
            tools = request.get("tools") if isinstance(request, dict) else None
            parses = bool(tools) and request.get("tool_choice") != "none"
            spans.append(Span(stream, row.label, start, end, parses))
    return spans


def corroborate(
    checks: Sequence[CheckResult], errors: Sequence[LoggedError], spans: Iterable[Span]
) -> tuple[list[CheckResult], list[dict[str, Any]]]:
    """The checks with the errors logged while their requests were in flight added to their
    summary and measurements (status unchanged), and every error with its attribution."""
    attributed = attribute(errors, spans)
    rows = [
        {**error.to_json(), "checks": list(ids), "in_flight": list(labels)}
        for error, ids, labels in attributed
    ]
    return with_logged_errors(checks, attributed), rows


def with_logged_errors(
    checks: Sequence[CheckResult], attributed: Sequence[Attributed]
) -> list[CheckResult]:
    """The checks with the attributed errors logged while their requests were in flight added
    to their summary and measurements (status unchanged)."""
    found = by_check(attributed)
    out = []
    for check in checks:
        mine = found.get(check.id)
        if not mine:
            out.append(check)
            continue
        out.append(
            dataclasses.replace(
                check,
                summary=check.summary + corroboration(mine),
                measurements={**check.measurements, LOGGED_ERRORS: len(mine)},
                evidence=(*check.evidence, SERVER_LOG),
            )
        )
    return out


def server_log_evidence(
    bundle: Bundle, path: Path, checks: Sequence[CheckResult]
) -> list[CheckResult]:
    """Read the server's log as it is now, keep it in the bundle, and corroborate the checks
    with the errors it logged while their requests were in flight. A log that cannot be read
    any more changes nothing (the startup copy is already in the bundle)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return list(checks)
    errors = runtime_errors(text, time.localtime().tm_year, None)
    bundle.write_text(SERVER_LOG, text)
    if not errors:
        return list(checks)
    corroborated, rows = corroborate(checks, errors, request_spans(bundle.root))
    bundle.write_json(SERVER_LOG_ERRORS, {"errors": len(errors), "attributed": rows})
    return corroborated
