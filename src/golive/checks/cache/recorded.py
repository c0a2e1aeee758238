"""The cache proof's steps held to the scrapes and records behind them (issue 27 §2).

Each row of `metrics/cache-steps.jsonl` carries the engine's counter deltas around one
request; they are recomputed here from the saved scrapes (`metrics/cache-NN-after-STEP.prom`,
the start scrape before the first), and the request's outcome from its record: a row that
does not match was not measured, and reuse is never judged from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from golive.bundle.request_line import RequestRecordLine
from golive.checks.cache.rules import START_SCRAPE, cached_prompt_tokens
from golive.metrics import MetricsDelta, vllm_snapshot

# Counters are floats in the exposition; a delta recomputed from the same text is exact.
_COUNTERS = (
    ("d_queries", lambda d: d.counter("prefix_cache_queries")),
    ("d_hits", lambda d: d.counter("prefix_cache_hits")),
    ("d_prompt_tokens_cached", cached_prompt_tokens),
)


def scrape_name(index: int, step: str) -> str:
    """The scrape taken after the `index`-th request (`step`), as the collector names it."""
    return f"cache-{index:02d}-after-{step.replace(':', '-')}"


def steps_differences(
    rows: Sequence[Mapping[str, Any]],
    scrape_text: Callable[[str], str | None],
    records: Sequence[RequestRecordLine],
    source: str,
) -> list[str]:
    """Each step's counter deltas against its two scrapes, its `ok` and prompt count against
    its record; a step named twice (one request, one row)."""
    out: list[str] = []
    before = vllm_snapshot(scrape_text(START_SCRAPE))
    by_label = {r.label: r for r in records}
    seen: set[str] = set()
    for index, row in enumerate(rows, start=1):
        step = str(row.get("step"))
        where = f"{source} line {index} ({step})"
        if step in seen:
            out.append(f"{where}: a second row for the step")
        seen.add(step)
        after = vllm_snapshot(scrape_text(scrape_name(index, step)))
        delta = None if before is None or after is None else MetricsDelta(before, after)
        for key, read in _COUNTERS:
            again = None if delta is None else read(delta)
            if row.get(key) != again:
                out.append(f"{where}: {key} {row.get(key)!r}, but its scrapes say {again!r}")
        record = by_label.get(f"cache-{step}")
        answered = record is not None and record.answered
        if bool(row.get("ok")) != answered:
            out.append(f"{where}: ok {row.get('ok')!r}, but its request record says {answered}")
        counted = _prompt_tokens(record)
        if row.get("prompt_tokens") != counted:
            out.append(
                f"{where}: prompt_tokens {row.get('prompt_tokens')!r}, but its request record "
                f"says {counted!r}"
            )
        before = after or before
    return out


def _prompt_tokens(record: RequestRecordLine | None) -> object:
    """The prompt tokens the server counted for a request, as its record keeps the answer."""
    response = None if record is None else record.response
    usage = response.get("usage") if isinstance(response, Mapping) else None
    return usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
