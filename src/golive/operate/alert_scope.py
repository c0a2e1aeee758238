"""Where the guardrails' alerts look: the label matchers that scope every expression to the
accepted deployment's series, and the groupings that keep a per-replica threshold per replica.

In a Prometheus shared by several vLLM deployments a bare `max(vllm:num_requests_waiting)`
fires for any of them, and a bare `sum(...)` adds every replica's queue together: neither is
the envelope one engine was accepted with. Every vector an alert reads carries the scope's
matchers (from the bundle: the served model's `model_name`, the Kubernetes namespace the run
read its pods in; from `--selector key=value`, which adds a label or overrides the bundle's),
and every threshold measured on one engine is compared per replica.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from golive.errors import ConfigError

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TEMPLATE_DELIMITER = re.compile(r"\{\{|\}\}")
# set by vLLM on its own series, not by the scrape: absent from other series of the target
ENGINE_LABELS = frozenset({"model_name"})
# one engine process: a target (job, instance), named by its pod where Kubernetes runs it; a
# label a scrape does not set groups as empty, so the same grouping holds outside Kubernetes
REPLICA = ("job", "namespace", "pod", "instance")
# the forms `golive guardrails --format` writes: a rules file, a Prometheus Operator
# PrometheusRule, an Argo Rollouts AnalysisTemplate
FORMATS = ("rules", "prometheusrule", "analysistemplate")
# where golive's runbook (docs/runbook.md) is served: a placeholder, as in the README
RUNBOOK = "https://github.com/YOUR-ORG/golive/blob/main/docs/runbook.md"
# one deployment: its replicas together (a service-level objective, a cap on any request)
DEPLOYMENT = ("job", "namespace", "model_name")


@dataclass(frozen=True, slots=True)
class Scope:
    """The label matchers, in order, each with where it came from ("bundle: ...", "--selector")."""

    labels: tuple[tuple[str, str], ...]
    origins: tuple[str, ...] = ()

    def value(self, label: str) -> str | None:
        return dict(self.labels).get(label)

    def matchers(self, *extra: str, engine: bool = True) -> str:
        """`a="x",b="y"` (and `extra`, already PromQL): every label of the scope, or without
        the engine's own labels for another series of the same target."""
        own = [
            f'{name}="{quote(value)}"'
            for name, value in self.labels
            if engine or name not in ENGINE_LABELS
        ]
        return ",".join([*own, *extra])

    def vector(self, metric: str, *extra: str, engine: bool = True) -> str:
        """`metric{matchers}`: a selector never left without the scope's labels."""
        inside = self.matchers(*extra, engine=engine)
        return f"{metric}{{{inside}}}"

    def describe(self) -> str:
        return ", ".join(f'{name}="{value}"' for name, value in self.labels)


def quote(value: str) -> str:
    """A PromQL double-quoted string's content."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def template_literal(text: str) -> str:
    """`text` as Prometheus renders it in an annotation (a Go template): every `{{` and `}}`
    of a label value or model name printed as itself, never read as an action."""
    return TEMPLATE_DELIMITER.sub(lambda found: '{{ "' + found.group(0) + '" }}', text)


def by(labels: Sequence[str]) -> str:
    return f"by ({', '.join(labels)})"


def parse_selectors(given: Iterable[str]) -> dict[str, str]:
    """`--selector key=value` flags as labels; `key=` removes a label the bundle gave."""
    out: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not LABEL_NAME.match(name) or value.startswith(("=", "~")):
            raise ConfigError(
                f"--selector {item!r}: give one label as key=value (a Prometheus label name, "
                "an exact value; key= drops a label the bundle gave), e.g. --selector job=vllm"
            )
        out[name] = value
    return out


def scope_of(from_bundle: Mapping[str, tuple[str, str]], given: Mapping[str, str]) -> Scope:
    """The bundle's labels (label -> (value, where it was read)) with the command line's
    added or overriding them. Refused when nothing is left to scope the alerts with."""
    labels: dict[str, tuple[str, str]] = dict(from_bundle)
    for name, value in given.items():
        if value:
            labels[name] = (value, "--selector")
        else:
            labels.pop(name, None)
    if not labels:
        raise ConfigError(
            "the alerts would match every vLLM this Prometheus scrapes: the bundle names no "
            "served model (model_name) or namespace to scope them with; give --selector "
            "key=value for the deployment's series (e.g. --selector job=vllm --selector "
            "namespace=llm)"
        )
    ordered = sorted(labels.items(), key=lambda kv: (kv[0] in ENGINE_LABELS, kv[0]))
    return Scope(
        tuple((name, value) for name, (value, _) in ordered),
        tuple(origin for _, (_, origin) in ordered),
    )
