"""The metric names golive relied on, as the engine itself described them.

vLLM renames and re-documents its metrics between versions (`gpu_cache_usage_perc` became
`kv_cache_usage_perc`; "running on GPU" became "in model execution batches"). A reviewer
reading a bundle a year later needs what the judgement read: for each metric golive uses,
the exposed name, type and `# HELP` text from the bundle's own scrapes, what golive reads it
for, the vLLM version that exposed it and that version's metrics documentation. Written to
`metrics/reference.json` before the bundle is sealed; a metric no scrape exposed is listed as
absent (a judgement that needed it said `no_data`), never given a text of golive's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from golive.bundle.store import locate_all
from golive.metrics import spellings

# (logical name, what golive reads it for): a literal list, kept next to the judgements
RELIED_ON: tuple[tuple[str, str], ...] = (
    ("num_requests_running", "requests in the engine: saturation, ramp steps, watch envelope"),
    ("num_requests_waiting", "the queue: the knee, saturation evidence, watch envelope"),
    ("kv_cache_usage_perc", "KV-cache pressure: saturation evidence, guardrail"),
    ("num_preemptions", "preemptions: saturation evidence"),
    ("request_queue_time_seconds", "time queued per request: saturation evidence"),
    ("request_success", "finished requests by reason: engine errors and aborts"),
    ("prompt_tokens", "prompt tokens: cache proof, token rates"),
    ("generation_tokens", "generated tokens: token rates"),
    ("prefix_cache_queries", "prefix-cache lookups: the cache proof"),
    ("prefix_cache_hits", "prefix-cache hits: the cache proof, watch cache regression"),
    ("prompt_tokens_cached", "cached prompt tokens: the cache proof"),
    ("prompt_tokens_by_source", "prompt tokens by where they came from: the cache proof"),
    ("cache_config_info", "the engine's cache config: prefix caching on, block size"),
    ("tool_call_parser_invocations", "tool-parser outcomes: parse failures"),
    ("time_to_first_token_seconds", "TTFT histogram: the guardrails' burn-rate rules"),
    ("request_prompt_tokens", "prompt length per request: the guardrails' context-cap rule"),
    ("http_requests", "the server's HTTP answers by status class: request error codes"),
    ("process_start_time_seconds", "the serving process's start: engine restarts in watch"),
)

_META = re.compile(r"^# (HELP|TYPE) (\S+) ?(.*)$", re.MULTILINE)
_ESCAPE = re.compile(r"\\(n|\\)")
_RELEASE = re.compile(r"v?((\d+)\.(\d+)\.\d+(?:\.post\d+|\.\d+)?)$")


def docs_url(version: str | None) -> str | None:
    """The metrics page of the vLLM documentation for release `version` (None: unknown, or a
    release candidate or development build, which has no page of its own)."""
    match = _RELEASE.match((version or "").split("+")[0])
    if match is None:  # unknown, or a development build with no page of its own
        return None
    release, major, minor = match.groups()
    page = "usage" if (int(major), int(minor)) >= (0, 9) else "serving"
    return f"https://docs.vllm.ai/en/v{release}/{page}/metrics.html"


def families(text: str) -> dict[str, dict[str, str]]:
    """Each family's `# HELP` text and `# TYPE` in one scrape, by the name it was exposed as."""
    found: dict[str, dict[str, str]] = {}
    for kind, name, rest in _META.findall(text):
        entry = found.setdefault(name, {})
        if kind == "HELP":  # the exposition's two escapes, undone in one pass
            entry["help"] = _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else "\\", rest)
        else:
            entry["type"] = rest
    return found


def metric_reference(
    scrapes: Iterable[tuple[str, str]], identity: Mapping[str, Any]
) -> dict[str, Any]:
    """The reference from `(bundle path, text)` scrapes: each metric as the first scrape
    that exposed it describes it."""
    seen: dict[str, tuple[str, dict[str, str]]] = {}
    for path, text in scrapes:
        for name, entry in families(text).items():
            seen.setdefault(name, (path, entry))
        if all(_exposed(logical, seen) for logical, _ in RELIED_ON):
            break  # a GPU run keeps hundreds of scrapes: the rest cannot change a row
    rows = []
    for logical, use in RELIED_ON:
        spelled = _exposed(logical, seen)
        row: dict[str, Any] = {"metric": logical, "read_for": use}
        if spelled is None:
            row.update(exposed=None, absent="no scrape in this bundle exposed it")
        else:
            path, entry = seen[spelled]
            row.update(exposed=spelled, type=entry.get("type"), help=entry.get("help"), scrape=path)
        rows.append(row)
    version = identity.get("vllm_version")
    return {
        "vllm_version": version,
        "documentation": docs_url(version if isinstance(version, str) else None),
        "metrics": rows,
    }


def _exposed(logical: str, seen: Mapping[str, object]) -> str | None:
    """The spelling of `logical` the scrapes exposed, if any."""
    return next((s for s in spellings(logical) if s in seen), None)


def bundle_scrapes(root: Path) -> Iterator[tuple[str, str]]:
    """The bundle's kept scrapes (a combined bundle's parts' too) in path order, each read
    only when asked for."""
    for path in locate_all(root, "metrics/*.prom"):
        yield str(path.relative_to(root)), path.read_text(encoding="utf-8", errors="replace")
