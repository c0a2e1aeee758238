"""The guardrails as Kubernetes custom resources: a `PrometheusRule` for the Prometheus
Operator (the plain rules file's groups, as its `spec`) and an Argo Rollouts
`AnalysisTemplate` carrying the watch's four rollback triggers (queue envelope, schema-invalid
tool calls, prefix-cache regression, OOM) as Prometheus metrics, so that a canary is judged by
the thresholds golive's own watch applies (`watch_rules`).

Each analysis metric answers one number or one per replica: a value means measured, no value
(nothing scraped, an idle engine) is Inconclusive, which pauses the rollout for a person:
silence is not health, and no promotion or rollback is decided blind.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from golive.operate.alert_scope import REPLICA, Scope, by
from golive.operate.guardrails import Provenance
from golive.operate.watch_rules import Thresholds

PROMETHEUS_RULE_API = "monitoring.coreos.com/v1"
ROLLOUTS_API = "argoproj.io/v1alpha1"
INTERVAL_MIN = 1  # minutes between two measurements of every analysis metric
# the window every metric reads, by default: at least twice the scrape interval (a 1 m scrape,
# Prometheus' default, puts 5 samples in it), so that a counter's rise is seen by `changes`
# and `increase`; longer where the watch's `repeated` scrapes must fit in it
WINDOW_MIN = 5
PARSER = "vllm:tool_call_parser_invocations_total"
HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
RESTARTS = "kube_pod_container_status_restarts_total"  # kube-state-metrics
TERMINATED = "kube_pod_container_status_last_terminated_reason"


def arg(name: str) -> str:
    """An Argo Rollouts argument reference, resolved in every field of the metric."""
    return "{{args." + name + "}}"


def engine(metric: str, *extra: str) -> str:
    """The deployment's engine series, scoped by the `selector` argument (the extra matchers
    first: an emptied selector leaves a trailing comma, which PromQL accepts)."""
    inside = ", ".join([*extra, arg("selector")])
    return metric + "{ " + inside + " }"


def metadata(scope: Scope, origin: Provenance, name: str | None = None) -> dict[str, Any]:
    """Name, namespace (the scope's, where it has one), and where the resource came from."""
    meta: dict[str, Any] = {"name": name or resource_name(scope)}
    if scope.value("namespace"):
        meta["namespace"] = scope.value("namespace")
    meta["labels"] = {"app.kubernetes.io/managed-by": "golive"}
    annotations = {
        "golive/bundle-digest": origin.digest,
        "golive/accepted-outcome": origin.outcome,
        "golive/scope": scope.describe(),
        "golive/runbook": origin.runbook,
    }
    if origin.signed_digest:
        annotations["golive/signed-bundle-digest"] = origin.signed_digest
    meta["annotations"] = annotations
    return meta


def resource_name(scope: Scope) -> str:
    """`golive-<served model>`: a DNS-1123 name Kubernetes accepts."""
    model = scope.value("model_name") or scope.value("job") or "deployment"
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return f"golive-{slug}"[:63].rstrip("-")


def prometheus_rule(rules: Mapping[str, Any], scope: Scope, origin: Provenance) -> dict[str, Any]:
    """The rules file's groups as a `PrometheusRule` (the Prometheus Operator loads it where
    its `ruleSelector` matches the resource's labels: add the label yours needs)."""
    return {
        "apiVersion": PROMETHEUS_RULE_API,
        "kind": "PrometheusRule",
        "metadata": metadata(scope, origin),
        "spec": {"groups": list(rules["groups"])},
    }


@dataclass(frozen=True, slots=True)
class AnalysisMetric:
    name: str
    query: str
    success: str
    failure: str
    failure_limit: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "interval": f"{INTERVAL_MIN}m",
            "failureLimit": self.failure_limit,
            "successCondition": self.success,
            "failureCondition": self.failure,
            "provider": {"prometheus": {"address": arg("prometheus-address"), "query": self.query}},
        }


def _count(name: str, query: str, failure_limit: int, fails_from: int = 1) -> AnalysisMetric:
    """A metric answering one count: below `fails_from` passes, from it fails, none is
    Inconclusive."""
    return AnalysisMetric(
        name,
        query,
        f"len(result) > 0 && result[0] < {fails_from}",
        f"len(result) > 0 && result[0] >= {fails_from}",
        failure_limit,
    )


def queue_envelope(th: Thresholds) -> AnalysisMetric:
    """Replicas outside the accepted queue envelope for the whole window (waiting above the
    cap, or running + waiting above the accepted concurrency), counted only where the window
    holds at least `samples` scrapes of the replica (the watch's `repeated` intervals in a
    row): one reading of a new pod fails nothing. A replica with fewer answers 0."""
    replica = by(REPLICA)
    waiting = f"sum {replica} ({engine('vllm:num_requests_waiting')})"
    running = f"sum {replica} ({engine('vllm:num_requests_running')})"
    outside = f"({waiting} > bool {arg('max-waiting')})"
    if th.max_concurrency is not None:
        over = f"({running} + {waiting} > bool {arg('max-concurrency')})"
        outside = f"clamp_max({outside} + {over}, 1)"
    window, queue = arg("window"), engine("vllm:num_requests_waiting")
    scrapes = f"min {replica} (count_over_time({queue}[{window}])) >= {arg('samples')}"
    judged = f"min_over_time({outside}[{window}:]) and on({', '.join(REPLICA)}) ({scrapes})"
    query = f"sum({judged}) or (0 * sum({queue}))"
    return _count("queue-envelope", query, 0)


def tool_call_schema() -> AnalysisMetric:
    """Scrape intervals in the window in which the tool-call parser's failure count rose
    (`changes`: every outcome is exposed from 0, so the first failure is a change); two fail
    (the watch: failures in two intervals). The window holds at least two scrapes of every
    series (the `window` argument: at least twice the scrape interval), and measurements a
    minute apart overlap: no failure falls between two windows."""
    failed = engine(PARSER, 'outcome!~"tool_call|no_tool_call"')
    query = f"sum(changes({failed}[{arg('window')}])) or (0 * sum({engine(PARSER)}))"
    return _count("tool-call-schema", query, 0, fails_from=2)


def cache_regression() -> AnalysisMetric:
    """Each serving replica's prefix-cache hit ratio over the window against `cache-floor`,
    the production workload's own ratio (not the accepted probe's reuse: the watch sends its
    own probe, production its own prompts); two low readings fail."""
    replica, window = by(REPLICA), arg("window")
    ratio = (
        f"sum {replica} (rate({engine(HITS)}[{window}])) / "
        f"(sum {replica} (rate({engine(QUERIES)}[{window}])) > 0)"
    )
    floor = arg("cache-floor")
    return AnalysisMetric(
        "cache-regression",
        ratio,
        f"len(result) > 0 && all(result, {{# >= {floor}}})",
        f"any(result, {{# < {floor}}})",
        1,
    )


def oom(container: str | None) -> AnalysisMetric:
    """Engine containers restarted `OOMKilled` in the window (kube-state-metrics), among the
    pods serving the deployment's engine series; the first fails (as in the watch)."""
    own = [f'namespace="{arg("namespace")}"'] + ([f'container="{container}"'] if container else [])
    restarts = RESTARTS + "{" + ", ".join(own) + "}"
    killed = TERMINATED + "{" + ", ".join([*own, 'reason="OOMKilled"']) + "}"
    window = arg("window")
    pods = (
        "group by (namespace, pod) "
        f"(last_over_time({engine('vllm:num_requests_running')}[{window}]))"
    )
    query = (
        f"sum((increase({restarts}[{window}]) > 0) and on(namespace, pod, container) "
        f"({killed} == 1) and on(namespace, pod) {pods}) "
        f"or (0 * sum({restarts} and on(namespace, pod) {pods}))"
    )
    return _count("oom", query, 0)


def analysis_template(
    th: Thresholds,
    scope: Scope,
    exposed: Collection[str],
    origin: Provenance,
    container: str | None = None,
    cache_floor: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """(the AnalysisTemplate, the triggers left out and why). `cache_floor`: the production
    workload's own hit ratio floor; without it the `cache-floor` argument has no value and
    the Rollout must give one (the bundle measured golive's probe, not production's ratio)."""
    args: list[dict[str, str]] = [
        {"name": "prometheus-address"},  # the Rollout gives it: the bundle cannot know it
        {"name": "selector", "value": scope.matchers()},
        {"name": "window", "value": f"{max(WINDOW_MIN, th.repeated + 2)}m"},
        {"name": "samples", "value": str(th.repeated)},
        {"name": "max-waiting", "value": f"{th.max_waiting:g}"},
    ]
    if th.max_concurrency is not None:
        args.append({"name": "max-concurrency", "value": str(th.max_concurrency)})
    metrics, left_out = [queue_envelope(th)], []
    if PARSER in exposed:
        metrics.append(tool_call_schema())
    else:
        left_out.append(f"tool-call-schema (needs {PARSER})")
    if HITS in exposed and QUERIES in exposed:
        # production's own ratio: the Rollout gives it where golive was not told it
        floor = {} if cache_floor is None else {"value": f"{cache_floor:g}"}
        args.append({"name": "cache-floor", **floor})
        metrics.append(cache_regression())
    else:
        left_out.append(f"cache-regression (needs {HITS}, {QUERIES})")
    namespace = scope.value("namespace")
    if namespace:
        args.append({"name": "namespace", "value": namespace})
        metrics.append(oom(container))
    else:
        left_out.append(
            "oom (kube-state-metrics' restarts are scoped by the pods' namespace: give "
            "--selector namespace=NS)"
        )
    spec = {"args": args, "metrics": [m.to_json() for m in metrics]}
    template = {
        "apiVersion": ROLLOUTS_API,
        "kind": "AnalysisTemplate",
        "metadata": metadata(scope, origin),
        "spec": spec,
    }
    return template, left_out
