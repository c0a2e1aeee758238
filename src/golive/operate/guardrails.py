"""`golive guardrails BUNDLE -o FILE`: Prometheus alerting rules for the accepted envelope,
scoped to the accepted deployment's series (`alert_scope`); `guardrail_files` writes them as a
rules file or as custom resources (`guardrail_resources`).

Every rule uses a metric name the accepted engine actually exposed (read from the bundle's
own /metrics snapshots): vLLM renames metrics between versions, and an alert on a vanished
name never fires. A rule whose metric is absent is left out and listed as such.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import CAPACITY_STEPS, SIGNOFF_JSON
from golive.bundle.store import locate
from golive.checks.cache.judge import prefix_reuse
from golive.checks.capacity.measured import ramp_ceiling
from golive.errors import ConfigError
from golive.metrics import Snapshot
from golive.operate.alert_scope import (
    DEPLOYMENT,
    REPLICA,
    Scope,
    by,
    quote,
    template_literal,
)
from golive.operate.rollback import ACCEPTED, programme_scope
from golive.quantiles import samples_needed
from golive.results import measured_float
from golive.verdict.document import VerdictDocument

# the accepted bundle measured the reuse of golive's own cache probe (a prompt sent twice), not
# the share of production's prompt tokens that hit the cache: that depends on the traffic
CACHE_FLOOR_UNKNOWN = (
    "the bundle measured golive's cache probe, not your traffic's hit ratio: give "
    "--cache-floor RATIO, from your production workload's own ratio"
)
TTFT_BUDGET = 0.01  # 99% of requests under the accepted TTFT
# Google SRE multi-window burn rates: (long window, short window, burn rate, severity)
BURN_WINDOWS = (("1h", "5m", 14.4, "page"), ("6h", "30m", 6.0, "ticket"))


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the accepted bundle measured and allowed."""

    max_concurrency: int | None
    max_waiting: float | None
    ttft_slo_s: float | None
    cache_hit_ratio: float | None
    max_context: int | None = None
    disable_features: tuple[str, ...] = ()
    ttft_slo_note: str = ""  # why no TTFT SLO could be derived from the measurements

    @property
    def waiting_cap(self) -> float:
        """Waiting requests above this are outside the envelope (twice the accepted peak)."""
        return max(1.0, 2 * (self.max_waiting or 0.0))


def envelope(
    verdict: VerdictDocument,
    steps: Sequence[Mapping[str, Any]] = (),
    ttft_slo_s: float | None = None,
) -> Envelope:
    """The envelope from the verdict and the ramp's steps (`metrics/capacity-steps.jsonl`).
    The TTFT SLO defaults to 1.5x the p95 TTFT measured at the accepted ceiling."""
    lim = verdict.limits
    ceiling = lim.max_concurrency or ramp_ceiling(verdict.measurements("capacity.concurrency"))
    inside = [s for s in steps if not ceiling or (s.get("concurrency") or 0) <= ceiling]
    waiting = [w for s in inside if (w := measured_float(s.get("max_waiting"))) is not None]
    measured = [s for s in inside if measured_float(s.get("ttft_p95_s")) is not None]
    # a p95 bounds an SLO only from enough samples (golive.quantiles); older steps name none
    # but their completed count
    needed = samples_needed(95)
    ttfts = [
        float(s["ttft_p95_s"])
        for s in measured
        if (s.get("ttft_samples") or s.get("completed") or 0) >= needed
    ]
    note = ""
    if measured and not ttfts and not ttft_slo_s:
        most = max(int(s.get("ttft_samples") or s.get("completed") or 0) for s in measured)
        note = (
            f"the p95 TTFT inside the envelope came from at most {most} requests per step; a "
            f"p95 needs {needed} to be bounded at 95% confidence: give --ttft-slo"
        )
    return Envelope(
        max_concurrency=ceiling,
        max_waiting=max(waiting) if waiting else None,
        ttft_slo_s=ttft_slo_s or (round(1.5 * max(ttfts), 3) if ttfts else None),
        cache_hit_ratio=prefix_reuse(verdict.measurements("cache.prefix_reuse")).hit_ratio,
        max_context=lim.max_context,
        disable_features=lim.disable_features,
        ttft_slo_note=note,
    )


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where the alerts came from, stated on every alert and on the custom resources."""

    bundle: str  # the accepted bundle as given
    digest: str  # sha256 of its manifest as sealed (`sha256sum BUNDLE/manifest-sha256.txt`)
    outcome: str
    runbook: str  # the runbook's URL; each alert's section is an anchor on it
    signed_digest: str | None = None  # the digest the signature (and the registry) names


def guardrail_rules(
    verdict: VerdictDocument,
    snapshot: Snapshot,
    env: Envelope,
    scope: Scope,
    origin: Provenance,
    cache_floor: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """(the rules file as data, names of rules left out because their metric is absent, or
    as said). `cache_floor`: the production workload's own prefix-cache hit ratio floor."""
    names = set(snapshot.samples) | set(snapshot.types)
    rules: list[dict[str, Any]] = []
    left_out: list[str] = []
    sel = scope.vector
    replica, deployment = by(REPLICA), by(DEPLOYMENT)
    where = "{{ $labels.namespace }}/{{ $labels.pod }} {{ $labels.instance }} ({{ $labels.job }})"

    def add(
        name: str, needs: Sequence[str], expr: str, for_: str, severity: str, what: str, why: str
    ) -> None:
        if not all(m in names for m in needs):
            left_out.append(f"{name} (needs {', '.join(needs)})")
            return
        annotations = {
            "summary": template_literal(what),
            "description": f"{why} Scope: {template_literal(scope.describe())}. "
            "Value: {{ $value }}.",
            "runbook_url": f"{origin.runbook}#{name.lower()}",
            "bundle_digest": origin.digest,
            "accepted_outcome": verdict.outcome.value,
        }
        if origin.signed_digest:
            annotations["signed_bundle_digest"] = origin.signed_digest
        labels = {"severity": severity, "source": "golive"}
        rules.append(
            {"alert": name, "expr": expr, "for": for_, "labels": labels, "annotations": annotations}
        )

    waiting = f"sum {replica} ({sel('vllm:num_requests_waiting')})"
    running = f"sum {replica} ({sel('vllm:num_requests_running')})"
    cap = env.waiting_cap
    add(
        "GoliveQueueBeyondEnvelope",
        ["vllm:num_requests_waiting"],
        f"{waiting} > {cap:g}",
        "5m",
        "page",
        f"waiting requests above the accepted envelope ({cap:g}) for 5 minutes",
        f"The engine on {where} queues more requests than twice the accepted peak.",
    )
    if env.max_concurrency is not None:
        add(
            "GoliveConcurrencyAboveAcceptedCap",
            ["vllm:num_requests_running", "vllm:num_requests_waiting"],
            f"{running} + {waiting} > {env.max_concurrency}",
            "5m",
            "ticket",
            f"traffic above the accepted concurrency cap {env.max_concurrency}",
            f"Running plus waiting requests on {where} exceed the concurrency the bundle "
            "accepted for one engine.",
        )
    if env.max_context is not None:
        bound = _bucket_at_least(snapshot, "vllm:request_prompt_tokens_bucket", env.max_context)
        count = sel("vllm:request_prompt_tokens_count")
        within = sel("vllm:request_prompt_tokens_bucket", f'le="{quote(bound or "")}"')
        add(
            "GoliveContextAboveAcceptedCap",
            ["vllm:request_prompt_tokens_bucket"] if bound else ["prompt-token bucket >= cap"],
            f"sum {deployment} (rate({count}[10m])) - sum {deployment} (rate({within}[10m])) > 0",
            "10m",
            "ticket",
            f"requests with more than {env.max_context} prompt tokens (the accepted cap) arrive",
            "Requests longer than the accepted context cap reach the deployment: enforce the "
            "cap at the gateway.",
        )
    kv = next(
        (m for m in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc") if m in names),
        "vllm:kv_cache_usage_perc",
    )
    add(
        "GoliveKvCacheNearlyFull",
        [kv],
        f"max {replica} ({sel(kv)}) > 0.95",
        "10m",
        "ticket",
        "KV cache above 95% for 10 minutes: preemptions and queueing follow",
        f"The KV cache of the engine on {where} stays nearly full.",
    )
    finished = "vllm:request_success_total"
    failed = sel(finished, 'finished_reason=~"error|abort"')
    add(
        "GoliveErrorRate",
        [finished],
        f"sum {replica} (rate({failed}[5m])) / (sum {replica} (rate({sel(finished)}[5m])) > 0) "
        "> 0.05",
        "5m",
        "page",
        "more than 5% of requests end in error or abort",
        f"The engine on {where} ends more than 5% of its requests in error or abort.",
    )
    # the generic instrumentator's name (no model_name): only the series of targets that are
    # this deployment's engines
    engines = f"and on(instance, job) {sel('vllm:num_requests_running')}"
    http = "http_requests_total"
    answers = f"sum {replica} (rate({sel(http, engine=False)}[5m]) {engines})"
    errors = sel(http, 'status="5xx"', engine=False)
    add(
        "GoliveHttp5xxRate",
        [http, "vllm:num_requests_running"],
        f"sum {replica} (rate({errors}[5m]) {engines}) / ({answers} > 0) > 0.05",
        "5m",
        "page",
        "more than 5% of the server's HTTP answers are 5xx (its own request error codes)",
        f"The server on {where} answers more than 5% of its HTTP requests with 5xx.",
    )
    parser = "vllm:tool_call_parser_invocations_total"
    parse_failed = sel(parser, 'outcome!~"tool_call|no_tool_call"')
    add(
        "GoliveToolCallParseFailures",
        [parser],
        f"sum {deployment} (rate({parse_failed}[10m])) > 0",
        "10m",
        "page",
        "the tool-call parser reports failures: schema-invalid calls reach clients",
        "The engine's tool-call parser fails on model output: clients receive calls that "
        "do not match their schema.",
    )
    hits, queries = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
    if cache_floor is None:
        left_out.append(f"GolivePrefixCacheRegression ({CACHE_FLOOR_UNKNOWN})")
    else:
        add(
            "GolivePrefixCacheRegression",
            [hits, queries],
            f"sum {replica} (rate({sel(hits)}[15m])) / (sum {replica} (rate({sel(queries)}[15m])) "
            f"> 0) < {cache_floor:g}",
            "30m",
            "ticket",
            f"prefix-cache hit ratio below {cache_floor:g} (--cache-floor: production's own)",
            f"The prefix cache of the engine on {where} reuses less of its prompts than the "
            "floor set from this deployment's own traffic (an idle engine is not judged).",
        )
    left_out += _burn_rate_rules(snapshot, env, scope, add)
    return {"groups": [{"name": "golive-accepted-envelope", "rules": rules}]}, left_out


def _burn_rate_rules(
    snapshot: Snapshot, env: Envelope, scope: Scope, add: Callable[..., None]
) -> list[str]:
    """The TTFT SLO's multi-window burn-rate rules over the deployment (an SLO is the
    service's, not one replica's); the names left out, and why."""
    if env.ttft_slo_note:
        return [f"GoliveTtftBurnRate{w[0]} ({env.ttft_slo_note})" for w in BURN_WINDOWS]
    if env.ttft_slo_s is None:
        return []
    bucket = "vllm:time_to_first_token_seconds_bucket"
    deployment = by(DEPLOYMENT)
    le = _bucket_at_least(snapshot, bucket, env.ttft_slo_s)
    fast = scope.vector(bucket, f'le="{quote(le or "")}"')
    count = scope.vector("vllm:time_to_first_token_seconds_count")
    for long, short, burn, severity in BURN_WINDOWS:
        limit = burn * TTFT_BUDGET
        exprs = [
            f"(1 - sum {deployment} (rate({fast}[{w}])) / "
            f"(sum {deployment} (rate({count}[{w}])) > 0)) > {limit:g}"
            for w in (long, short)
        ]
        add(
            f"GoliveTtftBurnRate{long}",
            [bucket] if le else [f"{bucket} with a bound >= {env.ttft_slo_s:g} s"],
            " and ".join(exprs),
            "2m",
            severity,
            f"TTFT SLO ({env.ttft_slo_s:.2f} s, bucket le={le}) burning {burn}x over "
            f"{long} and {short}",
            f"More than {limit:.1%} of first tokens miss the SLO over {long} and over {short}: "
            "the month's error budget goes in days at this rate.",
        )
    return []


def _bucket_at_least(snapshot: Snapshot, bucket: str, bound: float) -> str | None:
    """The `le` label of the smallest histogram bound at or above `bound` that the engine
    exposes, written exactly as its scrape wrote it: Prometheus matches the label's text, and
    vLLM (prometheus_client) writes `le="1.0"`, never `le="1"`."""
    exposed: dict[float, str] = {}
    for sample in snapshot.samples.get(bucket, ()):
        le = sample.label("le")
        try:
            value = float(le) if le is not None else math.inf
        except ValueError:
            continue
        if math.isfinite(value):
            exposed.setdefault(value, le or "")
    chosen = min((b for b in exposed if b >= bound), default=None)
    return None if chosen is None else exposed[chosen]


def render(
    document: Mapping[str, Any],
    left_out: Sequence[str],
    source: str,
    features: Sequence[str] = (),
    what: str = "Prometheus alerting rules",
    notes: Sequence[str] = (),
) -> str:
    head = f"# {what} generated by golive from {source}\n"
    head += "".join(f"# {note}\n" for note in notes)
    for feature in features:
        head += f"# accepted with this feature disabled (enforce it at the gateway): {feature}\n"
    if left_out:
        head += (
            "# left out (the accepted engine exposed no metric for it, or as said): "
            + "; ".join(left_out)
            + "\n"
        )
    return head + yaml.safe_dump(dict(document), sort_keys=False, width=120)


def signed_override(bundle: Path) -> str | None:
    """The override a reviewer signed the bundle with, if any (signoff.json)."""
    try:
        record = json.loads((bundle / SIGNOFF_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    signature = record.get("signature") if isinstance(record, dict) else None
    reason = signature.get("override_reason") if isinstance(signature, dict) else None
    return reason if isinstance(reason, str) else None


def read_accepted(bundle: Path) -> tuple[VerdictDocument, list[dict[str, Any]]]:
    """An accepted bundle's verdict and ramp steps (`metrics/capacity-steps.jsonl`): the
    envelope that guardrails and the watch both keep a deployment inside."""
    verdict = VerdictDocument.read(bundle)
    if verdict.outcome not in ACCEPTED:
        raise ConfigError(
            f"{bundle} was not accepted (outcome {verdict.outcome}): only "
            f"{' or '.join(ACCEPTED)} bundles define an envelope to keep"
        )
    programme_scope(verdict, bundle, "an accepted envelope")
    steps = [json.loads(line) for line in _lines(locate(bundle, CAPACITY_STEPS)) if line.strip()]
    return verdict, steps


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
