"""Reads an accepted bundle and writes its guardrails in one of three forms: a Prometheus
rules file (`rules`, what `promtool check rules` reads), a Prometheus Operator
`PrometheusRule` (`prometheusrule`) or an Argo Rollouts `AnalysisTemplate`
(`analysistemplate`). Every form is scoped by the labels the bundle gives (the served model's
`model_name` as the engine's own scrape states it, the namespace golive read the engine pods
in) and those of `--selector`, and names the bundle's digest."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from golive.bundle.layout import K8S_PODS, MANIFEST, SIGNOFF_JSON
from golive.bundle.store import BundleReader, locate_all
from golive.config import WatchConfig
from golive.errors import BadResponse, BundleError, ConfigError
from golive.metrics import Snapshot, parse_metrics
from golive.operate.alert_scope import FORMATS, RUNBOOK, Scope, parse_selectors, scope_of
from golive.operate.guardrail_resources import analysis_template, prometheus_rule
from golive.operate.guardrails import (
    Provenance,
    envelope,
    guardrail_rules,
    read_accepted,
    render,
)
from golive.operate.watch import thresholds


def accepted_snapshot(bundle: Path) -> Snapshot:
    """The latest readable vLLM scrape the bundle kept: the metric names (and the
    `model_name`) the accepted engine exposed."""
    scrapes = sorted(locate_all(bundle, "metrics/*.prom"), key=lambda p: p.stat().st_mtime)
    for path in reversed(scrapes):
        try:
            snapshot = parse_metrics(path.read_text(encoding="utf-8"))
        except BadResponse:
            continue
        if snapshot.has_vllm_metrics():
            return snapshot
    raise ConfigError(
        f"{bundle}/metrics has no readable vLLM scrape: the rules must use the metric "
        "names the accepted engine exposed"
    )


def bundle_labels(bundle: Path, snapshot: Snapshot) -> dict[str, tuple[str, str]]:
    """The labels the bundle gives for the deployment's series: the `model_name` its engine
    labelled its own metrics with (one name), the namespace of its pods (where the run read
    them)."""
    labels: dict[str, tuple[str, str]] = {}
    models = {
        value
        for name, series in snapshot.samples.items()
        if name.startswith("vllm:")
        for sample in series
        if (value := sample.label("model_name"))
    }
    if len(models) == 1:
        labels["model_name"] = (models.pop(), "bundle: the engine's /metrics")
    pods = _k8s_pods(bundle)
    source = pods.get("source")
    namespace = source.get("namespace") if isinstance(source, dict) else None
    if isinstance(namespace, str) and namespace:
        labels["namespace"] = (namespace, f"bundle: {K8S_PODS}")
    return labels


def engine_container(bundle: Path) -> str | None:
    """The engine container's name where every pod the run read names the same one."""
    pods = _k8s_pods(bundle)
    rows = pods.get("pods") if pods else None
    names = {r.get("container") for r in rows if isinstance(r, Mapping)} if rows else set()
    found = names.pop() if len(names) == 1 else None
    return found if isinstance(found, str) and found else None


def _k8s_pods(bundle: Path) -> dict[str, Any]:
    try:
        saved = BundleReader(bundle).json(K8S_PODS)
    except BundleError:
        return {}
    return saved if isinstance(saved, dict) else {}


def provenance(bundle: Path, outcome: str, runbook: str) -> Provenance:
    """The bundle's digest as its seal records it (sha256 of the manifest) and, when signed,
    the digest the signature names. An unsealed bundle is refused: no digest names it."""
    try:
        manifest = (bundle / MANIFEST).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{bundle / MANIFEST} cannot be read ({exc}): the bundle was never sealed, and "
            "the alerts must name the digest of the evidence they came from"
        ) from exc
    signoff = BundleReader(bundle).json(SIGNOFF_JSON)
    signature = signoff.get("signature") if isinstance(signoff, dict) else None
    signed = signature.get("bundle_digest") if isinstance(signature, dict) else None
    return Provenance(
        bundle=str(bundle),
        digest="sha256:" + hashlib.sha256(manifest).hexdigest(),
        outcome=outcome,
        runbook=runbook,
        signed_digest=signed if isinstance(signed, str) else None,
    )


def write_guardrails(
    bundle: Path,
    out: Path,
    ttft_slo_s: float | None = None,
    *,
    selectors: Sequence[str] = (),
    form: str = "rules",
    runbook: str = RUNBOOK,
) -> list[str]:
    """Read an accepted bundle, write its guardrails in `form`; returns what was left out."""
    if form not in FORMATS:
        raise ConfigError(f"--format {form!r}: one of {', '.join(FORMATS)}")
    given = parse_selectors(selectors)
    verdict, steps = read_accepted(bundle)
    snapshot = accepted_snapshot(bundle)
    scope = scope_of(bundle_labels(bundle, snapshot), given)
    origin = provenance(bundle, verdict.outcome.value, runbook)
    env = envelope(verdict, steps, ttft_slo_s)
    rules, left_out = guardrail_rules(verdict, snapshot, env, scope, origin)
    document: dict[str, Any] = rules
    what = "Prometheus alerting rules"
    if form == "prometheusrule":
        document, what = prometheus_rule(rules, scope, origin), "PrometheusRule"
    elif form == "analysistemplate":
        exposed = set(snapshot.samples) | set(snapshot.types)
        th = thresholds(env, WatchConfig())
        document, left_out = analysis_template(th, scope, exposed, origin, engine_container(bundle))
        what = "Argo Rollouts AnalysisTemplate (the watch's rollback triggers)"
    notes = _scope_notes(scope)
    text = render(document, left_out, str(bundle), env.disable_features, what, notes)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return left_out


def _scope_notes(scope: Scope) -> list[str]:
    return [
        f"scope: {name}={value!r} ({origin})"
        for (name, value), origin in zip(scope.labels, scope.origins, strict=True)
    ]
