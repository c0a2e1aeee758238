"""Which record lines keep their whole bodies, and what a line sampled out keeps instead.

A load phase sends thousands of requests; every failed or problematic one, and the first of
each stream, is kept whole, then one in `every` (`records.*` in the config). A line sampled out
keeps what identifies its request (`body_digest`) and its answer's ids, usage and finish
reasons (`answer_summary`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from golive.traffic.records import ParsedResponse


# what `json.dumps(body, sort_keys=True, ensure_ascii=False)` writes, its encoder made once
_DIGESTED_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def body_digest(body: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A request body kept as what identifies it: sha256 and size of its JSON, its shape."""
    if body is None:
        return None
    raw = _DIGESTED_JSON.encode(body).encode()
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "messages": len(body.get("messages") or ()),
        "tools": len(body.get("tools") or ()),
        "tool_choice": body.get("tool_choice")
        if isinstance(body.get("tool_choice"), str)
        else None,
        "max_tokens": body.get("max_tokens"),
        "response_format": (body.get("response_format") or {}).get("type"),
    }


def answer_summary(answer: Any) -> Any:
    """An answer kept without its text: ids, usage and each choice's finish reason."""
    if not isinstance(answer, dict):
        return None
    return {
        "id": answer.get("id"),
        "usage": answer.get("usage"),
        "finish_reasons": [
            c.get("finish_reason") for c in answer.get("choices") or () if isinstance(c, dict)
        ],
    }


@dataclass(slots=True)
class BodySample:
    """Which records keep their full bodies: every failed or problematic one, the first
    `first` of each stream, then one in `every` (`every` 1 keeps all, 0 none beyond those)."""

    first: int
    every: int
    seen: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_share(cls, first: int, share: float) -> BodySample:
        return cls(first, 0 if share <= 0 else max(1, round(1 / share)))

    def keep(self, stream: str, parsed: ParsedResponse) -> bool:
        n = self.seen.get(stream, 0)
        self.seen[stream] = n + 1
        if not parsed.record.ok or parsed.problems or n < self.first:
            return True
        return self.every > 0 and (n - self.first) % self.every == 0
