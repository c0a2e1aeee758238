"""report.md's "Workload sent" (issue 29 §5): what the load windows sent, against what they
were meant to resemble. With `--sample`, the user's sample is kept in the bundle
(`metrics/workload-sample.jsonl`) and its shape (messages, tools, max_tokens asked) stands
beside what was sent and what came back (prompt and completion tokens as the server counted
them, answers cut at max_tokens); without one, the default synthetic workload states its
shape from the effective config. Pure over the bundle's files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_SUSTAINED_REQUESTS,
    EFFECTIVE_CONFIG,
    WORKLOAD_SAMPLE,
    WORKLOAD_SAMPLE_TOKENS,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.quantiles import percentile
from golive.results import measured_int

QUANTILES = (50, 90, 99)


def workload_section(reader: BundleReader) -> str:
    """The section, or "" for a bundle whose capacity phases sent nothing. Never raises: a
    record it cannot read is said, and the bundle is sealed whatever its records hold."""
    try:
        return _section(reader)
    except Exception as exc:  # evidence in any shape: a report line, never a failed seal
        return f"\n## Workload sent\n\nnot built: a record could not be read ({exc!r:.200})\n"


def _section(reader: BundleReader) -> str:
    sent = [
        line
        for rel in (CAPACITY_CONCURRENCY_REQUESTS, CAPACITY_SUSTAINED_REQUESTS)
        for line in reader.records(rel)
        if line.answered
    ]
    sample = reader.jsonl(WORKLOAD_SAMPLE)
    if not sent and not sample:
        return ""
    lines = ["", "## Workload sent", ""]
    lines.append(_source(sample, reader.text(EFFECTIVE_CONFIG)))
    lines += [
        "",
        "| requests | count | messages p50 / p90 / max | tools (share) | max_tokens asked "
        "p50 / p90 / max | prompt tokens p50 / p90 / p99 | completion tokens p50 / p90 / p99 "
        "| cut at max_tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if sample:
        counted = sample_prompt_tokens(reader.records(WORKLOAD_SAMPLE_TOKENS))
        shapes = [_shape(body, counted.get(i)) for i, body in enumerate(sample)]
        lines.append(_row("your sample (each once)", shapes))
    lines.append(_row("sent, answered (concurrency + sustained)", [_sent(line) for line in sent]))
    return "\n".join(lines) + "\n"


def sample_prompt_tokens(records: Sequence[RequestRecordLine]) -> dict[int, int]:
    """Sample line index -> its prompt tokens, from the server's `/tokenize` answers saved as
    records labelled `sample-<index>` (an answer that is not a count is left out)."""
    counted: dict[int, int] = {}
    for line in records:
        label, response = line.label, _mapping(line.response)
        index = label.removeprefix("sample-")
        ok = line.http_status == 200 and line.failure is None
        if ok and label.startswith("sample-") and re.fullmatch(r"[0-9]+", index):
            count = measured_int(response.get("count"))
            if count is not None:
                counted[int(index)] = count
    return counted


def _source(sample: Sequence[Mapping[str, Any]], config_text: str | None) -> str:
    if sample:
        return (
            f"Source: your sample (`--sample`), {len(sample)} request(s), kept as "
            f"`{WORKLOAD_SAMPLE}`; the load windows cycle through it. Prompt and completion "
            "tokens are the server's counts of what was sent and answered; your sample's "
            f"prompt tokens are the server's `/tokenize` counts (`{WORKLOAD_SAMPLE_TOKENS}`, "
            "up to 50 lines spread over the sample; — where the server has no /tokenize)."
        )
    config = yaml.safe_load(config_text or "") if config_text else None
    capacity = config.get("capacity") if isinstance(config, dict) else None
    if not isinstance(capacity, dict):
        return "Source: golive's default synthetic Agent workload (its settings are not here)."
    return (
        "Source: golive's default synthetic Agent workload (no `--sample`): a "
        f"{capacity.get('system_prompt_words')}-word system prompt, "
        f"{capacity.get('tools')} tool(s), {capacity.get('turns')} earlier turn(s), "
        f"{_share(capacity.get('long_share'))} long inputs of "
        f"{capacity.get('long_prompt_words')} words, {_share(capacity.get('structured_share'))} "
        f"asking a structured answer, at most {capacity.get('max_tokens')} output tokens "
        "(capacity.* in the effective config). Give `--sample FILE` (JSONL chat bodies) to "
        "send your own traffic instead."
    )


def _share(value: Any) -> str:
    return f"{float(value):.0%}" if isinstance(value, (int, float)) else "?"


Shape = tuple[int | None, bool | None, int | None, int | None, int | None, bool | None]


def _shape(body: Mapping[str, Any], prompt_tokens: int | None = None) -> Shape:
    """A request body's messages, tools, max_tokens and, where the server counted it, its
    prompt tokens (no answer: no completion tokens)."""
    tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    return (
        len(body.get("messages") or ()),
        bool(body.get("tools")),
        tokens if isinstance(tokens, int) else None,
        prompt_tokens,
        None,
        None,
    )


def _sent(line: RequestRecordLine) -> Shape:
    """A saved record: its request (whole, or the digest a sampled-out record keeps) and the
    answer's usage and finish reasons (whole, or the summary kept)."""
    request = _mapping(line.request)
    response = _mapping(line.response)
    messages = request.get("messages")
    count = len(messages) if isinstance(messages, list) else messages
    tools = request.get("tools")
    has_tools = bool(tools) if not isinstance(tools, int) else tools > 0
    usage = _mapping(response.get("usage"))
    reasons = response.get("finish_reasons")
    if not isinstance(reasons, list):
        choices = response.get("choices")
        listed = choices if isinstance(choices, list) else []
        reasons = [c.get("finish_reason") for c in listed if isinstance(c, dict)]
    asked = request.get("max_tokens", request.get("max_completion_tokens"))
    return (
        count if isinstance(count, int) else None,
        has_tools,
        asked if isinstance(asked, int) else None,
        measured_int(usage.get("prompt_tokens")),
        measured_int(usage.get("completion_tokens")),
        "length" in reasons if reasons else None,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _row(name: str, shapes: Sequence[Shape]) -> str:
    def column(i: int) -> list[float]:
        return [float(v) for s in shapes if isinstance(v := s[i], int) and not isinstance(v, bool)]

    tools = [s[1] for s in shapes if s[1] is not None]
    cut = [s[5] for s in shapes if s[5] is not None]
    return (
        f"| {name} | {len(shapes)} | {_spread(column(0), (50, 90, 100))} | "
        f"{_ratio(tools)} | {_spread(column(2), (50, 90, 100))} | "
        f"{_spread(column(3), QUANTILES)} | {_spread(column(4), QUANTILES)} | {_ratio(cut)} |"
    )


def _spread(values: list[float], qs: Iterable[int]) -> str:
    if not values:
        return "—"
    return " / ".join(f"{percentile(values, q):.0f}" for q in qs)


def _ratio(flags: Sequence[bool]) -> str:
    return f"{sum(flags) / len(flags):.0%}" if flags else "—"
