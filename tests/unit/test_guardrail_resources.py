"""`golive guardrails --format prometheusrule|analysistemplate`: the custom resources validate
against the projects' published CRD schemas (tests/data/schemas), every expression is scoped
to the accepted deployment, and the expressions behave in Prometheus (promtool) as the
accepted envelope means: per replica, blind to another deployment's series."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from golive.cli.main import main
from tests.helpers.guardrail_inputs import generate, synthetic_bundle
from tests.helpers.promtool import expr_values

DATA = Path(__file__).parent.parent / "data"
SCHEMAS = DATA / "schemas"
MODEL = 'model_name="qwen2.5-coder-0.5b"'  # the demo engine's own label
PROMETHEUS_RULE_CRD = "monitoring.coreos.com_prometheusrules.yaml"
ANALYSIS_TEMPLATE_CRD = "analysis-template-crd.yaml"
pytestmark = pytest.mark.synthetic_checks  # a verdict and its scrapes, sealed, nothing else


def _validate(resource: dict[str, Any], crd_file: str) -> None:
    """Validate against the CRD's openAPIV3Schema. The schema itself is not checked against
    JSON Schema's metaschema: the operator's `^(?i)(abort|warn)?$` is Go RE2 (an inline flag
    Python's `re` refuses), and it applies only to a Thanos field golive never writes."""
    crd = yaml.safe_load((SCHEMAS / crd_file).read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.Draft7Validator(schema).validate(resource)


def _write(
    tmp_path: Path,
    form: str,
    *selectors: str,
    pods: dict[str, Any] | None = None,
    cache_floor: float | None = 0.3,
) -> tuple[Any, list[str], Path]:
    out = tmp_path / f"{form}.yml"
    root = synthetic_bundle(tmp_path, pods=pods)
    left = generate(root, out, 10.0, selectors, form, "https://r/x", cache_floor)
    return yaml.safe_load(out.read_text()), left, out


def _queries(template: dict[str, Any]) -> dict[str, str]:
    """Each analysis metric's query with its arguments' default values put in."""
    values = {a["name"]: a.get("value", "") for a in template["spec"]["args"]}
    return {
        m["name"]: re.sub(
            r"\{\{args\.([a-z-]+)\}\}",
            lambda g: values[g.group(1)],
            m["provider"]["prometheus"]["query"],
        )
        for m in template["spec"]["metrics"]
    }


def _selectors(expr: str) -> list[tuple[str, str]]:
    """(metric, its matchers) for every vector selector in a PromQL expression."""
    return re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr)


def test_prometheusrule_validates_against_the_published_crd(tmp_path: Path) -> None:
    """The PrometheusRule is valid under prometheus-operator's own CRD schema, carries the
    same rules as the plain file, and names the bundle it came from."""
    resource, _, _ = _write(tmp_path, "prometheusrule", "job=vllm")
    _validate(resource, PROMETHEUS_RULE_CRD)
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    manifest = (tmp_path / "bundle/manifest-sha256.txt").read_bytes()
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert resource["metadata"]["annotations"]["golive/bundle-digest"] == digest
    rules = resource["spec"]["groups"][0]["rules"]
    assert len(rules) == 9
    for rule in rules:
        notes = rule["annotations"]
        assert notes["bundle_digest"] == digest
        assert notes["runbook_url"] == f"https://r/x#{rule['alert'].lower()}"
        assert notes["description"]
        assert notes["summary"]


def test_a_schema_catches_a_malformed_resource(tmp_path: Path) -> None:
    """The vendored schemas reject what the operators would: the validation can fail."""
    resource, _, _ = _write(tmp_path, "prometheusrule", "job=vllm")
    del resource["spec"]["groups"][0]["name"]
    with pytest.raises(jsonschema.ValidationError):
        _validate(resource, PROMETHEUS_RULE_CRD)
    template, _, _ = _write(tmp_path / "t", "analysistemplate", "job=vllm")
    template["spec"]["metrics"][0]["failureLimit"] = [1]
    with pytest.raises(jsonschema.ValidationError):
        _validate(template, ANALYSIS_TEMPLATE_CRD)


def test_analysistemplate_carries_the_four_rollback_triggers(tmp_path: Path) -> None:
    """With the pods' namespace from the bundle, the AnalysisTemplate holds the watch's four
    rollback triggers as Prometheus metrics, valid under Argo Rollouts' CRD schema, each
    query valid PromQL (promtool) and scoped to the deployment."""
    pods = {"source": {"namespace": "llm", "selector": "app=vllm"}, "pods": [{"container": "vllm"}]}
    template, left, out = _write(tmp_path, "analysistemplate", "job=vllm", pods=pods)
    _validate(template, ANALYSIS_TEMPLATE_CRD)
    assert left == []
    assert template["metadata"]["namespace"] == "llm"
    metrics = {m["name"]: m for m in template["spec"]["metrics"]}
    assert set(metrics) == {"queue-envelope", "tool-call-schema", "cache-regression", "oom"}
    for metric in metrics.values():
        assert metric["successCondition"]
        assert metric["failureCondition"]
        assert metric["interval"]
        assert isinstance(metric["failureLimit"], int)
    args = {a["name"]: a.get("value") for a in template["spec"]["args"]}
    assert args["max-concurrency"] == "4"  # the demo's accepted ceiling
    assert args["prometheus-address"] is None  # the Rollout must name its Prometheus
    queries = _queries(template)
    assert 'container="vllm"' in queries["oom"]
    rules = [{"record": f"golive:{n.replace('-', '_')}", "expr": q} for n, q in queries.items()]
    checked = tmp_path / "queries.yml"
    checked.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    check = subprocess.run(
        ["promtool", "check", "rules", str(checked)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "# scope: namespace='llm' (bundle: environment/k8s-pods.json)" in out.read_text()


def test_without_a_cache_floor_the_rollout_must_give_one(tmp_path: Path) -> None:
    """The bundle measured golive's cache probe, not production's hit ratio: without
    --cache-floor the `cache-floor` argument has no value (Argo Rollouts refuses to run the
    analysis until the Rollout gives it), and the template still validates."""
    template, _, _ = _write(tmp_path, "analysistemplate", "job=vllm", cache_floor=None)
    _validate(template, ANALYSIS_TEMPLATE_CRD)
    args = {a["name"]: a for a in template["spec"]["args"]}
    assert "value" not in args["cache-floor"]
    assert "cache-regression" in {m["name"] for m in template["spec"]["metrics"]}
    given, _, _ = _write(tmp_path / "given", "analysistemplate", "job=vllm", cache_floor=0.25)
    assert {a["name"]: a.get("value") for a in given["spec"]["args"]}["cache-floor"] == "0.25"


def test_without_a_namespace_the_oom_trigger_is_left_out_and_said(tmp_path: Path) -> None:
    """kube-state-metrics' restarts are scoped by namespace: with none known the OOM trigger
    is not written unscoped but listed as left out, with the flag that adds it."""
    template, left, _ = _write(tmp_path, "analysistemplate")
    assert "oom" not in {m["name"] for m in template["spec"]["metrics"]}
    assert any(x.startswith("oom") and "--selector namespace=" in x for x in left)


@pytest.mark.parametrize("form", ["rules", "prometheusrule", "analysistemplate"])
def test_a_command_line_selector_scopes_every_expression(tmp_path: Path, form: str) -> None:
    """`--selector` given on the command line appears in every vector selector of every
    expression (the served model's label too, on vLLM's own series): none is unscoped."""
    out = tmp_path / "out.yml"
    golden = tmp_path / "accepted"  # a bundle that re-derives: the command refuses others
    shutil.copytree(DATA / "golden-demo", golden)
    code = main(
        [
            "guardrails",
            str(golden),
            "-o",
            str(out),
            "--format",
            form,
            "--ttft-slo",
            "10",
            "--selector",
            "job=llm-prod",
            "--selector",
            "namespace=serving",
        ]
    )
    assert code == 0
    document = yaml.safe_load(out.read_text())
    if form == "analysistemplate":
        exprs = list(_queries(document).values())
    else:
        groups = document["spec"]["groups"] if form == "prometheusrule" else document["groups"]
        exprs = [r["expr"] for r in groups[0]["rules"]]
    assert exprs
    for expr in exprs:
        found = _selectors(expr)
        assert found, expr
        for metric, matchers in found:
            assert 'namespace="serving"' in matchers, expr
            if metric.startswith("kube_"):  # kube-state-metrics' own job; its pods joined
                assert "and on(namespace, pod) group by (namespace, pod)" in expr, expr
                continue
            assert 'job="llm-prod"' in matchers, expr
            if metric.startswith("vllm:"):
                assert MODEL in matchers, expr
        # no metric name read without matchers
        bare = re.findall(r"(?<![\w:\"])(vllm:[a-z_]+|http_requests_total|kube_\w+)(?![\w{])", expr)
        assert bare == [], expr


def _promql_test(tmp_path: Path, expr: str, series: list[tuple[str, str]], want: list[str]) -> None:
    spec = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": w, "value": 1} for w in want],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(spec))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_concurrency_cap_holds_per_replica_and_ignores_other_deployments(
    tmp_path: Path,
) -> None:
    """In a shared Prometheus, two replicas each inside the accepted cap (4) do not alert
    although together they exceed it; a third over it alerts on its own labels; another
    deployment's engine, far over, is not this alert's business."""
    _, _, out = _write(tmp_path, "rules", "job=vllm")
    rules = {r["alert"]: r["expr"] for r in yaml.safe_load(out.read_text())["groups"][0]["rules"]}
    ours = 'job="vllm",namespace="llm",model_name="qwen2.5-coder-0.5b"'
    series = []
    for pod, running in (("a", 3), ("b", 3), ("c", 6)):
        target = f'{ours},pod="{pod}",instance="{pod}:8000"'
        series += [
            (f"vllm:num_requests_running{{{target}}}", f"{running}x10"),
            (f"vllm:num_requests_waiting{{{target}}}", "0x10"),
        ]
    other = 'job="vllm",namespace="other",model_name="llama",pod="z",instance="z:8000"'
    series += [
        (f"vllm:num_requests_running{{{other}}}", "50x10"),
        (f"vllm:num_requests_waiting{{{other}}}", "50x10"),
    ]
    expr = f"({rules['GoliveConcurrencyAboveAcceptedCap']}) > bool 0"
    want = '{instance="c:8000", job="vllm", namespace="llm", pod="c"}'
    _promql_test(tmp_path, expr, series, [want])


def _outcome(metric: dict[str, Any], value: float) -> str:
    """What Argo Rollouts makes of one measurement answering `value`: the conditions here
    are `len(result) > 0 && result[0] OP N`, which read the same in Python."""
    result = [value]
    for name, key in (("Successful", "successCondition"), ("Failed", "failureCondition")):
        condition = metric[key].replace("&&", "and")
        if eval(condition, {"len": len}, {"result": result}):
            return name
    return "Inconclusive"


def _template(tmp_path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    template, _, _ = _write(tmp_path, "analysistemplate", "job=vllm")
    return {m["name"]: m for m in template["spec"]["metrics"]}, _queries(template)


ENGINE = 'job="vllm",model_name="qwen2.5-coder-0.5b"'


@pytest.mark.parametrize(
    ("interval", "failures", "eval_time", "answer", "outcome"),
    [
        # a 1 m scrape (Prometheus' default), the parser failing every minute
        ("1m", "0+1x30", "10m30s", 4, "Failed"),  # 5 scrapes in the window, 4 rises
        # a 30 s scrape, one failure between two scrapes a minute apart: seen, as the watch
        # sees one interval with failures (no trigger)
        ("30s", "0x21 1x40", "11m15s", 1, "Successful"),
        # ... and a second failure a minute later: failures in two intervals
        ("30s", "0x21 1 1 2x40", "12m15s", 2, "Failed"),
    ],
)
def test_tool_call_parser_failures_are_seen_in_every_window(
    tmp_path: Path, interval: str, failures: str, eval_time: str, answer: int, outcome: str
) -> None:
    """The `tool-call-schema` measurement reads a window holding several scrapes: with a 1 m
    scrape it counts the parser's failures (it once read one sample and answered 0 while the
    parser failed every minute), and two intervals with failures fail the rollout."""
    metrics, queries = _template(tmp_path)
    parser = "vllm:tool_call_parser_invocations_total"
    series = [
        (f'{parser}{{{ENGINE},outcome="tool_call"}}', "0+10x60"),
        (f'{parser}{{{ENGINE},outcome="invalid"}}', failures),
    ]
    run = expr_values(
        tmp_path, queries["tool-call-schema"], series, [("{}", answer)], eval_time, interval
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert _outcome(metrics["tool-call-schema"], answer) == outcome


@pytest.mark.parametrize(
    ("waiting", "answer", "outcome"),
    [
        # a new canary pod: its first scrape shows 3 waiting (the cap is 1), then none
        ("_x10 3 0 0 0", 0, "Successful"),
        # its one and only scrape so far, outside: not yet the watch's repeated intervals
        ("_x10 3", 0, "Successful"),
        # outside for every scrape of the window
        ("3x14", 1, "Failed"),
    ],
)
def test_queue_envelope_needs_the_watchs_repeated_readings(
    tmp_path: Path, waiting: str, answer: int, outcome: str
) -> None:
    """One reading of a new pod outside the queue envelope fails no rollout (it once did:
    `min_over_time` of a single sample is that sample); a replica outside for the whole
    window, over at least the watch's repeated scrapes, does."""
    metrics, queries = _template(tmp_path)
    target = f'{ENGINE},namespace="llm",pod="canary",instance="c:8000"'
    series = [
        (f"vllm:num_requests_waiting{{{target}}}", waiting),
        (f"vllm:num_requests_running{{{target}}}", waiting.replace("3", "1").replace("0", "1")),
    ]
    eval_time = "10m" if waiting.endswith("3") else "14m"
    run = expr_values(
        tmp_path, queries["queue-envelope"], series, [("{}", answer)], eval_time, "1m"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert _outcome(metrics["queue-envelope"], answer) == outcome
