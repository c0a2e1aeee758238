"""A load window's size: the request cap that stops a runaway (from the measured rate), and
whether the window carried the load it was asked to (its coverage)."""

from __future__ import annotations

import math

COVERED_SHARE = 0.9  # a window must run at least this share of its duration
IN_FLIGHT_SHARE = 0.5  # ... with at least this share of its concurrency in flight at peak


def window_coverage(
    duration_s: float,
    wall_s: float,
    stopped_by: str,
    cap: int,
    peak_in_flight: int,
    concurrency: int,
) -> str | None:
    """Why a load window did not carry the load it was asked to (None: it did). Such a
    window is no_data: judging it would judge golive's own sizing, not the engine."""
    if stopped_by == "request_cap" and wall_s < COVERED_SHARE * duration_s:
        return (
            f"the request cap ({cap}) was reached after {wall_s:.1f} s of {duration_s:g} s: the "
            "load did not cover the window (the engine is faster than the cap allowed)"
        )
    if concurrency >= 2 and peak_in_flight < IN_FLIGHT_SHARE * concurrency:
        return f"at most {peak_in_flight} of {concurrency} requests were in flight"
    return None


def request_cap(rate_per_slot: float, concurrency: int, duration_s: float, safety: float) -> int:
    """A window's request cap from the measured rate: requests per second per concurrency
    slot x slots x duration x a safety factor (throughput grows at most linearly with
    concurrency, so this over-estimates; the cap only stops a runaway)."""
    return math.ceil(rate_per_slot * concurrency * duration_s * safety) + concurrency
