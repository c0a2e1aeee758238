"""Reads an accepted bundle and writes its guardrails in one of three forms: a Prometheus
rules file (`rules`, what `promtool check rules` reads), a Prometheus Operator
`PrometheusRule` (`prometheusrule`) or an Argo Rollouts `AnalysisTemplate`
(`analysistemplate`). Every form is scoped by the labels the bundle gives (the served model's
`model_name` as the engine's own scrape states it, the namespace golive read the engine pods
in) and those of `--selector`, and names the bundle's digest.

Only a bundle `golive watch --accepted` would keep a deployment inside is turned into
guardrails: intact, and re-derived by `golive decide` to its sealed verdict (the `Vouch` the
orchestration layer gives); a reviewer's signed digest is copied only where the manifest's
signature proves the sign-off (`--trust-key`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.bundle.layout import K8S_PODS, MANIFEST, SIGNOFF_JSON
from golive.bundle.store import BundleReader, locate_all, require_trusted
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
    signed_override,
)
from golive.operate.rollback import Vouch
from golive.operate.watch import thresholds
from golive.verdict.document import VerdictDocument


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


def provenance(
    bundle: Path, outcome: str, runbook: str, trusted: Sequence[Path] = ()
) -> tuple[Provenance, str | None]:
    """The bundle's digest as its seal records it (sha256 of the manifest) and, when a
    reviewer's signature is proven, the digest that signature names; with it, why a signature
    the bundle states was not copied (None when there is none or it was)."""
    try:
        manifest = (bundle / MANIFEST).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{bundle / MANIFEST} cannot be read ({exc}): the bundle was never sealed, and "
            "the alerts must name the digest of the evidence they came from"
        ) from exc
    signed, unproven = signed_digest(bundle, outcome, trusted)
    origin = Provenance(
        bundle=str(bundle),
        digest="sha256:" + hashlib.sha256(manifest).hexdigest(),
        outcome=outcome,
        runbook=runbook,
        signed_digest=signed,
    )
    return origin, unproven


def signed_digest(
    bundle: Path, outcome: str, trusted: Sequence[Path]
) -> tuple[str | None, str | None]:
    """(the digest a reviewer signed, why a stated one is not taken). signoff.json is the
    bundle's own word, re-sealed with it: only a manifest signed by a `trusted` key
    (`golive signoff --sign-key`, checked as `golive signoff --trust-key` checks it) proves
    the signature was recorded by golive signoff and not written in afterwards."""
    signoff = BundleReader(bundle).json(SIGNOFF_JSON)
    signature = signoff.get("signature") if isinstance(signoff, dict) else None
    stated = signature.get("bundle_digest") if isinstance(signature, dict) else None
    if not isinstance(stated, str) or not isinstance(signature, dict):
        return None, None
    why = f"signed_bundle_digest ({SIGNOFF_JSON} states {stated}, "
    if signature.get("verdict_outcome") != outcome:
        return None, why + f"over a {signature.get('verdict_outcome')} verdict, not {outcome})"
    if not trusted:
        return None, why + "unproven: give --trust-key PUB, the reviewer's sealing key)"
    try:
        require_trusted(bundle, trusted)
    except ConfigError as exc:
        return None, why + f"unproven: {exc})"
    return stated, None


@dataclass(frozen=True, slots=True)
class AcceptedBundle:
    """What the guardrails are made of, read from a bundle `golive decide` re-derives."""

    verdict: VerdictDocument
    steps: list[dict[str, Any]]
    snapshot: Snapshot
    labels: dict[str, tuple[str, str]]  # label -> (value, where the bundle gives it)
    container: str | None
    origin: Provenance
    not_taken: tuple[str, ...] = ()  # what the bundle states but does not prove, and why


def read_bundle(
    bundle: Path, vouch: Vouch, runbook: str = RUNBOOK, trusted: Sequence[Path] = ()
) -> AcceptedBundle:
    """An accepted bundle, refused as `golive watch --accepted` refuses it: altered since it
    was sealed, or edited and re-sealed so that its evidence no longer gives its verdict."""
    read_accepted(bundle)  # not accepted at all: said first
    vouch(bundle, "guardrails", signed_override(bundle))
    return assemble(bundle, runbook, trusted)


def assemble(bundle: Path, runbook: str = RUNBOOK, trusted: Sequence[Path] = ()) -> AcceptedBundle:
    """What the guardrails read from a bundle, without asking whether `golive decide` still
    gives its verdict (`read_bundle` asks first)."""
    verdict, steps = read_accepted(bundle)
    snapshot = accepted_snapshot(bundle)
    origin, unproven = provenance(bundle, verdict.outcome.value, runbook, trusted)
    return AcceptedBundle(
        verdict,
        steps,
        snapshot,
        bundle_labels(bundle, snapshot),
        engine_container(bundle),
        origin,
        () if unproven is None else (unproven,),
    )


def write_guardrails(
    bundle: Path,
    out: Path,
    ttft_slo_s: float | None = None,
    *,
    vouch: Vouch,
    selectors: Sequence[str] = (),
    form: str = "rules",
    runbook: str = RUNBOOK,
    trusted: Sequence[Path] = (),
    cache_floor: float | None = None,
) -> list[str]:
    """Read an accepted bundle, write its guardrails in `form`; returns what was left out."""
    if form not in FORMATS:
        raise ConfigError(f"--format {form!r}: one of {', '.join(FORMATS)}")
    given = parse_selectors(selectors)
    text, left_out = guardrails_text(
        read_bundle(bundle, vouch, runbook, trusted), given, form, ttft_slo_s, cache_floor
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return left_out


def guardrails_text(
    accepted: AcceptedBundle,
    given: Mapping[str, str],
    form: str = "rules",
    ttft_slo_s: float | None = None,
    cache_floor: float | None = None,
) -> tuple[str, list[str]]:
    """(the file's text in `form`, what was left out and why)."""
    if cache_floor is not None and not 0 < cache_floor <= 1:
        raise ConfigError(f"--cache-floor {cache_floor:g}: a hit ratio, above 0 and at most 1")
    scope = scope_of(accepted.labels, given)
    origin, snapshot = accepted.origin, accepted.snapshot
    env = envelope(accepted.verdict, accepted.steps, ttft_slo_s)
    rules, left_out = guardrail_rules(accepted.verdict, snapshot, env, scope, origin, cache_floor)
    document: dict[str, Any] = rules
    what = "Prometheus alerting rules"
    if form == "prometheusrule":
        document, what = prometheus_rule(rules, scope, origin), "PrometheusRule"
    elif form == "analysistemplate":
        exposed = set(snapshot.samples) | set(snapshot.types)
        th = thresholds(env, WatchConfig())
        document, left_out = analysis_template(
            th, scope, exposed, origin, accepted.container, cache_floor
        )
        what = "Argo Rollouts AnalysisTemplate (the watch's rollback triggers)"
    left_out = [*left_out, *accepted.not_taken]
    text = render(
        document, left_out, origin.bundle, env.disable_features, what, _scope_notes(scope)
    )
    return text, left_out


def _scope_notes(scope: Scope) -> list[str]:
    return [
        f"scope: {name}={value!r} ({origin})"
        for (name, value), origin in zip(scope.labels, scope.origins, strict=True)
    ]
