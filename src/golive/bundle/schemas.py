"""A typed schema for each evidence file `golive decide` judges numbers from (issue 27 §2).

The judges read the request records, the load windows' rows, the long-input ladder, the
cache steps, the calibration, the ledger and the death and restart records. Each file is
checked against its schema before anything is judged: a missing key, a wrong type or a line
that is not JSON is named with the file, the line and the field ("metrics/capacity-steps.jsonl
line 3: Expected `int`, got `str` - at `$.completed`"), never a traceback and never read as
a default. The schemas state what golive has written since these files exist: keys added
later are optional, so older bundles still read; keys beyond them are allowed. The request
records' schema is the struct golive writes and the judges read them as
(`request_line.RequestRecordLine`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from golive.bundle.layout import (
    CACHE_STEPS,
    CAPACITY_CALIBRATION,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_LADDER,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    LEDGER_SENT,
    RESTART,
    TERMINATION,
    TERMINATION_AFTER_RESTART,
)
from golive.bundle.request_line import NOT_RECORDS, RequestRecordLine
from golive.bundle.store import ZSTD, read_lines, record_streams
from golive.errors import BundleError

SHOWN = 3  # problems named per file; the count says how many more


class WindowRow(msgspec.Struct):
    """A load window's row: a ramp step, a knee repeat, the sustained window (`StepStats`)."""

    concurrency: int
    completed: int
    errors: int
    wall_s: float
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    ttft_p95_s: float | None
    queue_mean_s: float | None
    max_waiting: float | None
    max_running: float | None
    preemptions: float | None
    engine_died: bool = False
    mean_waiting: float | None = None
    refused: int = 0
    refused_detail: str = ""
    server_errors: int = 0
    cancelled: int = 0
    coverage: str | None = None
    stall: str | None = None
    engine_held: float | None = None
    retries: int = 0
    timeouts: int = 0
    curve_rows: list[int] | None = None
    label: str | None = None


class Calibration(msgspec.Struct):
    requests: int
    wall_s: float
    rate_per_slot: float
    idle_silence_s: float | None = None
    stall_after_s: float | None = None


class LadderStep(msgspec.Struct):
    context_tokens: int
    outcome: str
    detail: str | None = None
    prompt_tokens: int | None = None


class Ladder(msgspec.Struct):
    steps: list[LadderStep]
    max_context: int | None = None
    max_model_len: int | None = None
    top_step: int | None = None


class CacheStep(msgspec.Struct):
    step: str
    prompt_tokens: int | None
    cached_tokens: int | None
    ttft_s: float | None
    d_queries: float | None
    d_hits: float | None
    d_prompt_tokens_cached: float | None
    ok: bool


class Ledger(msgspec.Struct):
    sent: int


class Termination(msgspec.Struct):
    reason: str
    phase: str | None
    concurrency: int | None
    at: float | None = None
    health_request_id: str | None = None


class Restart(msgspec.Struct):
    served_again: bool
    how: str | None = None
    failure: str | None = None
    waited_s: float | None = None


@dataclass(frozen=True, slots=True)
class Schema:
    path: str  # relative to the bundle (a JSON-lines file: one value a line)
    kind: type[msgspec.Struct]
    lines: bool


SCHEMAS = (
    Schema(CAPACITY_STEPS, WindowRow, True),
    Schema(CAPACITY_KNEE_REPEATS, WindowRow, True),
    Schema(CAPACITY_SUSTAINED, WindowRow, False),
    Schema(CAPACITY_CALIBRATION, Calibration, False),
    Schema(CAPACITY_LADDER, Ladder, False),
    Schema(CACHE_STEPS, CacheStep, True),
    Schema(LEDGER_SENT, Ledger, False),
    Schema(TERMINATION, Termination, False),
    Schema(TERMINATION_AFTER_RESTART, Termination, False),
    Schema(RESTART, Restart, False),
)


def schema_problems(root: Path) -> list[str]:
    """Every evidence file under a schema that does not meet it, named with its line and
    field (empty: all read as typed). A combined bundle's parts are checked each."""
    out: list[str] = []
    for part in [root, *sorted((root / "parts").glob("*"))]:
        prefix = "" if part == root else f"{part.relative_to(root)}/"
        for schema in SCHEMAS:
            path = part / schema.path
            if not path.is_file():
                path = part / (schema.path + ZSTD)
            if path.is_file():
                out += _checked(path, prefix + schema.path, schema.kind, schema.lines)
        for path in record_streams(part):
            rel = f"requests/{path.name}"
            if rel.removesuffix(ZSTD) not in NOT_RECORDS:
                out += _checked(path, prefix + rel, RequestRecordLine, True)
        out += [f"{prefix}{cut}" for cut in _scrapes_cut_short(part)]
    return out


_FAMILY = re.compile(rb"^# TYPE (vllm:\S+)", re.MULTILINE)


def _scrapes_cut_short(part: Path) -> list[str]:
    """Saved vLLM scrapes cut short after the run: one that does not end as a /metrics body
    does (with a newline), or one whose vLLM metric families are the start of another scrape's
    in the same order, and fewer (an engine declares its families at start, in one order, in
    every scrape: a cut at a line's end reads as a whole exposition, but a shorter one; a
    scrape of another source, such as a federation, lists its families in its own order). A
    judge reads only the series it names, so a cut that keeps them would otherwise pass
    unseen. (A body that is no vLLM exposition — an error page, another server's answer — is
    judged as unreadable where it is read.)"""
    scrapes = {
        path.name: text
        for path in sorted((part / "metrics").glob("*.prom"))
        if b"vllm:" in (text := path.read_bytes())
    }
    out = [
        f"metrics/{name}: cut short (a scrape ends with a newline)"
        for name, text in scrapes.items()
        if not text.endswith(b"\n")
    ]
    families = {name: _FAMILY.findall(text) for name, text in scrapes.items()}
    for name, own in families.items():
        whole = next(
            (f for other, f in families.items() if other != name and _cut_from(own, f)), None
        )
        if whole is not None:
            missing = whole[len(own) :]
            out.append(
                f"metrics/{name}: ends after {len(own)} of the {len(whole)} vLLM metric "
                f"families another scrape of the bundle declares in the same order (the first "
                f"missing: {missing[0].decode(errors='replace')}): cut short at a line's end"
            )
    return out


def _cut_from(own: list[bytes], whole: list[bytes]) -> bool:
    """`own` is the start of `whole`, and shorter."""
    return len(own) < len(whole) and whole[: len(own)] == own


def _checked(path: Path, rel: str, kind: type[msgspec.Struct], lines: bool) -> list[str]:
    decoder = msgspec.json.Decoder(kind)
    found = [f"{rel}{where}: {why}" for where, why in _failures(path, decoder, lines)]
    if len(found) > SHOWN:
        found = [*found[:SHOWN], f"{rel}: {len(found) - SHOWN} more line(s) like these"]
    return found


def _failures(
    path: Path, decoder: msgspec.json.Decoder[Any], lines: bool
) -> Iterator[tuple[str, str]]:
    try:
        if not lines:
            try:
                decoder.decode(path.read_bytes())
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                yield "", str(exc)
            return
        for number, line in enumerate(read_lines(path), start=1):
            if not line.strip():
                continue
            try:
                decoder.decode(line.encode())
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                yield f" line {number}", str(exc)
    except (OSError, BundleError) as exc:
        yield "", f"cannot be read ({exc})"
