"""The capacity request the checklist asks for before buying GPUs (`capacity-request.json`
and `.md`), written only with an `expand-capacity` verdict.

Every figure cites the bundle file it came from; a figure the evidence does not give is
`null` with the reason, never a default. The target is taken as one replica: the ceiling, the
throughput and the GPUs per replica are what golive measured at it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.layout import (
    CAPACITY_STEPS,
    EFFECTIVE_CONFIG,
    STARTUP_LOG,
    VERDICT,
)
from golive.bundle.store import BundleReader
from golive.checks.cache.judge import cache_labels
from golive.checks.capacity.measured import capacity_ceiling
from golive.checks.env.judge import serving_launch
from golive.config import parse_config
from golive.results import CheckResult, Classification, Outcome, measured_float
from golive.verdict.document import ExercisedEnvelope

ENV_SCRAPE = "metrics/env.prom"
_GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class Figure:
    """One number of the request and where it came from (None: the evidence does not say)."""

    name: str
    value: float | int | None
    unit: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


def _expanding(checks: Sequence[CheckResult]) -> CheckResult | None:
    """The expand-capacity check a request is sized from: the one whose limit is lowest (a
    sustained window that did not hold at the ramp's ceiling sets a lower one than the ramp
    beside it), else the first."""
    expanding = [c for c in checks if c.classification is Classification.EXPAND_CAPACITY]
    limits = [
        (limit, n)
        for n, c in enumerate(expanding)
        if (limit := capacity_ceiling(c.measurements)) is not None
    ]
    if limits:
        return expanding[min(limits)[1]]
    return expanding[0] if expanding else None


def _kv_from_metrics(labels: Mapping[str, str]) -> tuple[float | None, float | None]:
    """(KV tokens, KV bytes) from `vllm:cache_config_info`, where its labels carry them."""

    def label(key: str) -> float | None:
        try:
            return float(labels[key])
        except (KeyError, ValueError):
            return None

    tokens = label("kv_cache_size_tokens")
    if tokens is None and (blocks := label("num_gpu_blocks")) and (size := label("block_size")):
        tokens = blocks * size
    return tokens, label("kv_cache_memory_bytes")


def _step_rate(reader: BundleReader, concurrency: int) -> float | None:
    for line in (reader.text(CAPACITY_STEPS) or "").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("concurrency") == concurrency:
            return measured_float(row.get("throughput_rps"))
    return None


def _ceiling(expanding: CheckResult, envelope: ExercisedEnvelope) -> tuple[int | None, str]:
    """The concurrency one replica is sized at: the limit the expanding check set
    (`capacity_ceiling`), which is below the ramp's highest stable step where that step did
    not hold for the sustained window; else the ramp's ceiling."""
    limit = capacity_ceiling(expanding.measurements)
    ramp = envelope.max_concurrency
    if limit is None or limit < 1:
        return ramp, f"{VERDICT}#capacity.concurrency"
    source = f"{VERDICT}#{expanding.id}"
    if ramp is not None and limit < ramp:
        source = (
            f"{VERDICT}#{expanding.id}: the ramp's stable step {ramp} did not hold for the "
            f"sustained window, so a replica holds fewer; {limit:g} is the cap golive set, "
            f"not itself sustained (run the window at it, --concurrency {limit:g}, before "
            "buying)"
        )
    return int(limit), source


def capacity_request(
    reader: BundleReader, outcome: Outcome, checks: Sequence[CheckResult]
) -> dict[str, Any] | None:
    """The request, from the bundle's evidence and its judged checks; None unless the
    outcome is expand-capacity."""
    expanding = _expanding(checks)
    if outcome is not Outcome.EXPAND_CAPACITY or expanding is None:
        return None
    # a combined bundle: the evidence and config of the part whose check expanded
    part = next(
        ("/".join(e.split("/")[:2]) + "/" for e in expanding.evidence if e.startswith("parts/")),
        "",
    )
    if part:
        reader = BundleReader(reader.root / part)
    envelope = ExercisedEnvelope.of(checks)
    config_text = reader.text(EFFECTIVE_CONFIG)
    config = parse_config(config_text or "{}", EFFECTIVE_CONFIG).capacity
    facts = serving_launch(reader)
    kv_tokens_metrics, kv_bytes_metrics = _kv_from_metrics(cache_labels(reader.text(ENV_SCRAPE)))
    ceiling, ceiling_source = _ceiling(expanding, envelope)
    figures: list[Figure] = []

    def add(name: str, value: float | None, unit: str, source: str) -> None:
        where = (
            f"{part}{source}"
            if source.startswith(("environment/", "metrics/", "config/"))
            else source
        )
        figures.append(Figure(name, value, unit, where if value is not None else "not given"))

    add(
        "weights_per_gpu",
        facts.model_load_gib if facts else None,
        "GiB",
        f"{STARTUP_LOG} ('Model loading took')",
    )
    kv_gib = facts.available_kv_gib if facts else None
    add("kv_cache_per_gpu", kv_gib, "GiB", f"{STARTUP_LOG} ('Available KV cache memory')")
    kv_tokens = (facts.kv_cache_tokens if facts else None) or kv_tokens_metrics
    kv_source = (
        f"{STARTUP_LOG}#L{facts.kv_cache_line}"
        if facts and facts.kv_cache_tokens
        else f"{ENV_SCRAPE}#vllm:cache_config_info"
    )
    add("kv_tokens_available", kv_tokens, "tokens", kv_source)
    kv_bytes = kv_gib * _GIB if kv_gib else kv_bytes_metrics
    per_token = round(kv_bytes / kv_tokens) if kv_bytes and kv_tokens else None
    add(
        "kv_bytes_per_token_per_gpu",
        per_token,
        "bytes",
        "KV cache memory ("
        + ("kv_cache_per_gpu" if kv_gib else f"{ENV_SCRAPE} kv_cache_memory_bytes")
        + ") / kv_tokens_available",
    )
    layout = facts.parallel() if facts and (facts.args_line or facts.engine_line) else None
    gpus = layout["tp"] * layout["pp"] * layout["dp"] if layout else None
    add("gpus_per_replica", gpus, "GPUs", f"{STARTUP_LOG} (tp x pp x dp)")
    add("ceiling_concurrency", ceiling, "requests in flight", ceiling_source)
    add(
        "ceiling_context",
        envelope.max_context,
        "tokens",
        f"{VERDICT}#capacity.long_input (longest input served)",
    )
    rate = None if ceiling is None else _step_rate(reader, int(ceiling))
    add(
        "throughput_at_ceiling",
        rate,
        "requests/s",
        f"{CAPACITY_STEPS}#concurrency={ceiling:g}" if ceiling else "",
    )
    required = config.required_concurrency
    add(
        "required_concurrency",
        required,
        "requests in flight",
        f"{EFFECTIVE_CONFIG}#capacity.required_concurrency",
    )
    if config.required_context is not None:  # (bundles sealed before the key have none)
        add(
            "required_context",
            config.required_context,
            "tokens",
            f"{EFFECTIVE_CONFIG}#capacity.required_context",
        )
        add(
            "kv_memory_for_required_context",
            round(config.required_context * per_token / _GIB, 2) if per_token else None,
            "GiB per GPU",
            "required_context x kv_bytes_per_token_per_gpu: one request of that length",
        )
        add(
            "kv_growth_for_required_context",
            round(config.required_context / kv_tokens, 2) if kv_tokens else None,
            "x",
            "required_context / kv_tokens_available: how many times one replica's KV cache "
            "must grow to hold one request of that length (more GPUs per replica where the "
            "cache shards across them; an MLA latent cache is held whole by every "
            "tensor-parallel rank, so there it takes larger GPUs or context parallelism)",
        )
    add("headroom", config.headroom, "fraction", f"{EFFECTIVE_CONFIG}#capacity.headroom")
    # rounded to 9 places first: 100 x 1.1 / 2 is 55, not the 55.000000000000007 floats give
    replicas = (
        math.ceil(round(required * (1 + config.headroom) / ceiling, 9))
        if required and ceiling
        else None
    )
    add("replicas_needed", replicas, "replicas", "required x (1 + headroom) / ceiling, rounded up")
    add(
        "gpus_needed",
        replicas * gpus if replicas and gpus else None,
        "GPUs",
        "replicas_needed x gpus_per_replica",
    )
    add(
        "fallback_concurrency",
        math.floor(round(ceiling / (1 + config.headroom), 9)) if ceiling else None,
        "requests in flight",
        "ceiling / (1 + headroom), rounded down: what today's size serves until it grows",
    )
    return {
        "outcome": outcome.value,
        "check": expanding.id,
        "why": expanding.summary,
        "assumption": "the target is one replica; every figure was measured at it",
        "figures": [f.to_json() for f in figures],
    }


def render_capacity_request(request: Mapping[str, Any]) -> str:
    """capacity-request.md: the figures as a table, each with its source."""
    lines = [
        "# Capacity request",
        "",
        f"Why: {request['why']} (`{request['check']}`).",
        "",
        f"Assumption: {request['assumption']}.",
        "",
        "| figure | value | unit | source |",
        "| --- | --- | --- | --- |",
    ]
    for figure in request["figures"]:
        value = "not given" if figure["value"] is None else f"{figure['value']:,.6g}"
        lines.append(f"| {figure['name']} | {value} | {figure['unit']} | {figure['source']} |")
    return "\n".join(lines) + "\n"
