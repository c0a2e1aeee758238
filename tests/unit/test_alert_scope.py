"""The label matchers and groupings every guardrail expression is built from."""

from __future__ import annotations

import pytest

from golive.errors import ConfigError
from golive.operate.alert_scope import by, parse_selectors, quote, scope_of

BUNDLE = {"model_name": ("qwen", "bundle: /metrics"), "namespace": ("llm", "bundle: pods")}


@pytest.mark.parametrize(
    ("given", "engine", "target"),
    [
        # the bundle's labels alone: the engine's series carry model_name, the target's not
        ([], 'namespace="llm",model_name="qwen"', 'namespace="llm"'),
        # a selector adds a label to every series of the target
        (
            ["job=vllm"],
            'job="vllm",namespace="llm",model_name="qwen"',
            'job="vllm",namespace="llm"',
        ),
        # ... overrides the bundle's value
        (["namespace=prod"], 'namespace="prod",model_name="qwen"', 'namespace="prod"'),
        # ... or drops a label this Prometheus does not set
        (["namespace="], 'model_name="qwen"', ""),
        # a quote in a value cannot end the matcher early
        (
            ['team=a"b'],
            'namespace="llm",team="a\\"b",model_name="qwen"',
            'namespace="llm",team="a\\"b"',
        ),
    ],
)
def test_selectors_scope_the_engine_and_target_series(
    given: list[str], engine: str, target: str
) -> None:
    """The command line's selectors add to or override the bundle's labels; vLLM's own
    series also match the served model, other series of the same target do not need to."""
    scope = scope_of(BUNDLE, parse_selectors(given))
    assert scope.matchers() == engine
    assert scope.matchers(engine=False) == target
    assert scope.vector("vllm:x", 'le="1"') == "vllm:x{" + ",".join([engine, 'le="1"']) + "}"


@pytest.mark.parametrize("bad", ["job", "1job=x", "job=~vllm.*", "job==x", "a-b=c"])
def test_a_selector_that_is_not_one_exact_label_is_refused(bad: str) -> None:
    """A selector that is not `key=value` with a Prometheus label name is a usage error."""
    with pytest.raises(ConfigError, match="--selector"):
        parse_selectors([bad])


def test_nothing_left_to_scope_with_is_refused() -> None:
    """Alerts that would match every vLLM in a shared Prometheus are never written."""
    with pytest.raises(ConfigError, match="every vLLM"):
        scope_of({"model_name": ("qwen", "bundle")}, parse_selectors(["model_name="]))
    with pytest.raises(ConfigError, match="every vLLM"):
        scope_of({}, {})


@pytest.mark.parametrize(
    ("raw", "quoted"), [("plain", "plain"), ('a"b', 'a\\"b'), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb")]
)
def test_values_are_quoted_for_promql(raw: str, quoted: str) -> None:
    """Label values with quotes, backslashes or newlines stay one PromQL string."""
    assert quote(raw) == quoted


def test_grouping_names_every_label() -> None:
    """A grouping clause lists its labels in order."""
    assert by(("job", "pod")) == "by (job, pod)"
