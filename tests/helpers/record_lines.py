"""Saved request record lines for tests, built as a bundle holds them: the keys a test names
over what golive writes for a request that says nothing else, decoded from JSON text into
the struct the judges read (`RequestRecordLine`)."""

from __future__ import annotations

import json
from typing import Any

from golive.bundle.request_line import RequestRecordLine, decode_line

BARE: dict[str, Any] = {
    "label": "",
    "started_at": 0.0,
    "http_status": 200,
    "timings_ms": {},
    "failure": None,
}


def record_line(**keys: Any) -> RequestRecordLine:
    """One line: `keys` over `BARE`, through the JSON text a stream would hold."""
    return decode_line(json.dumps({**BARE, **keys}), "test line")


def record_lines(rows: list[dict[str, Any]]) -> list[RequestRecordLine]:
    """Each row (a line's keys, as a test writes them) as its line."""
    return [record_line(**row) for row in rows]
