"""A window's stall held to its saved records (issue 27): the records must be the window's
as golive's client wrote them (`shape_differences`), and the silence they show must be the
one the row names (`stall_differences`), at the bar the calibration's own records set
(`calibrated_stall_s`). Pure: rows and record lines in, the differences out. Times
fabricated consistently across every field and file cannot be told from real ones without
the signing key."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence

from golive.bundle.request_line import RecordFailure, RequestRecordLine
from golive.checks.capacity.stalls import (
    Flight,
    idle_silence_s,
    saved_flight,
    silence,
    stall_after_s,
    stall_headline,
)
from golive.results import measured_float

SPAN_SLACK_S = 2.0  # a window's records may outlast its wall time by this (+2%): clock reads
SPAN_SLACK_SHARE = 0.02


def _time_problem(line: RequestRecordLine) -> str | None:
    """Why a saved record's times, numbers all, cannot be one attempt's as golive's client
    writes them (None: they can): chunks on a non-streamed answer, out of order or after its
    end; a first chunk that is not its first byte, a first token that is no chunk; an end
    that disagrees with the same end from the intended send; a read that timed out after N s
    without data, with a byte inside those N s."""
    timings = line.timings_ms
    chunks = timings.chunks
    end = timings.end
    if chunks and not line.stream:
        return "a non-streamed answer with streamed chunks"
    if any(b < a for a, b in itertools.pairwise(chunks)) or any(c < 0 for c in chunks):
        return "its chunks are out of order"
    if end is not None and chunks and chunks[-1] > end:
        return "a chunk came after its end"
    if chunks and timings.first_byte != chunks[0]:
        return f"its first chunk ({chunks[0]} ms) is not its first byte"
    token = timings.first_token
    if chunks and token is not None and token not in chunks:
        return f"its first token ({token} ms) is none of its chunks"
    lag = timings.schedule_lag
    waited = timings.waited  # a retry: the attempts before it
    if waited is None or waited < 0:
        return f"its wait for earlier attempts ({waited!r}) is no time"
    for name, since_sent, given in (
        ("end", end, timings.end_from_intended),
        ("first token", token, timings.first_token_from_intended),
    ):
        intended = given if isinstance(given, float) else None
        if (
            since_sent is not None
            and intended is not None
            and lag is not None
            and abs(intended - lag - waited - since_sent) > END_TOLERANCE_MS
        ):
            return (
                f"its {name} ({since_sent} ms) is not its {name} from the intended send less "
                "the lag and the earlier attempts"
            )
    return _silent_timeout(line.failure, chunks, end)


END_TOLERANCE_MS = 0.001
_NO_DATA = re.compile(r"no data for ([\d.]+) s(?: \(read\) / ([\d.]+) s \(connect\))?")


def _silent_timeout(
    failure: RecordFailure | None, chunks: Sequence[float], end: float | None
) -> str | None:
    """A read timeout ("no data for N s") means N s passed after its last byte."""
    if failure is None or failure.kind != "timeout" or end is None:
        return None
    found = _NO_DATA.match(failure.message)
    if found is None:
        return None
    need = min(float(g) for g in found.groups() if g)
    silent = (end - max([0.0, *chunks])) / 1000
    if silent < need * 0.99 - 0.1:
        return (
            f"it timed out after {need:g} s without data, but its last byte came "
            f"{silent:.2f} s before its end"
        )
    return None


def peak(flights: Sequence[Flight]) -> int:
    """The most attempts in flight at once (an end and a start at one moment do not overlap)."""
    edges = sorted(
        [(f.sent, 1) for f in flights]
        + [(f.end if f.end is not None else f.sent, -1) for f in flights]
    )
    level = most = 0
    for _, step in edges:
        level += step
        most = max(most, level)
    return most


def window_flights(
    lines: Sequence[RequestRecordLine], concurrency: int, wall_s: object, where: str
) -> tuple[list[Flight], list[str]]:
    """The window's flights, read once, and how its records differ from a window's as sent:
    each attempt's times as the client writes them (`_time_problem`), no more in flight at
    once than the window's concurrency, all within the time the window ran."""
    flights: list[Flight] = []
    bad: list[tuple[RequestRecordLine, str]] = []
    for line in lines:
        why = _time_problem(line)
        if why is not None:
            bad.append((line, why))
        else:
            flights.append(saved_flight(line))
    if bad:
        line, why = bad[0]
        return flights, [
            f"{where}: {len(bad)} request record(s) with times no attempt has: "
            f"{line.request_id!r}: {why}"
        ]
    out = []
    if flights and (most := peak(flights)) > concurrency:
        out.append(
            f"{where}: its records hold {most} requests in flight at once, above its "
            f"concurrency {concurrency}"
        )
    wall = measured_float(wall_s)
    if flights and wall is not None:
        span = max(f.end if f.end is not None else f.sent for f in flights) - min(
            f.sent for f in flights
        )
        if span > wall * (1 + SPAN_SLACK_SHARE) + SPAN_SLACK_S:
            out.append(f"{where}: its records span {span:.1f} s, but the window ran {wall:g} s")
    return flights, out


def shape_differences(
    lines: Sequence[RequestRecordLine], concurrency: int, wall_s: object, where: str
) -> list[str]:
    """How `lines` differ from a window's records as sent (`window_flights`)."""
    return window_flights(lines, concurrency, wall_s, where)[1]


def stall_differences(
    row: Mapping[str, object],
    lines: Sequence[RequestRecordLine],
    stall_s: float,
    where: str,
) -> list[str]:
    """A window's row against the silence in its saved records (`lines`: its attempts, no
    probes): a stall the records show that the row does not name, or one it names that they
    do not show, or of another length; records not the window's as sent (`shape_differences`)
    first."""
    concurrency = row.get("concurrency")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool):
        return []
    flights, out = window_flights(lines, concurrency, row.get("wall_s"), where)
    if out:
        return out
    found = silence(flights, stall_s, concurrency)
    said = row.get("stall")
    if found is None:
        if isinstance(said, str):
            return [f"{where}: names a stall, but its {len(lines)} request records show none"]
        return []
    headline = stall_headline(*found, concurrency)
    if not isinstance(said, str) or not said.startswith(headline):
        return [f"{where}: stall {said!r}, but its request records say {headline!r}"]
    return []


def calibrated_stall_s(calibration: Sequence[RequestRecordLine], stall_s: float) -> float:
    """The silence the run held every window to (`stall_after_s`), from the calibration
    window's counted attempts (`label` calibrate; `recorded.answers_of`), as the run measured
    it: the answered ones' longest silences."""
    flights = [saved_flight(line) for line in calibration]
    return stall_after_s(stall_s, idle_silence_s(flights))
