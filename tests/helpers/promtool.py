"""`promtool test rules` from a test: input series, then the alerts (or the values of an
expression) Prometheus itself evaluates from them, so that a rule's firing is what is tested,
not its text."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

Series = Sequence[tuple[str, str]]  # (series with labels, promtool's values notation)


def _run(spec: Mapping[str, Any], path: Path) -> subprocess.CompletedProcess[str]:
    path.write_text(yaml.safe_dump(dict(spec), sort_keys=False))
    return subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False
    )


def alerts_fire(
    rules: Path,
    series: Series,
    firing: Mapping[str, Sequence[Mapping[str, str]]],
    eval_time: str,
    interval: str = "1m",
) -> subprocess.CompletedProcess[str]:
    """promtool's answer to: at `eval_time`, each alert in `firing` fires with exactly these
    label sets (an empty list: it does not fire). Return code 0 when Prometheus agrees. The
    rules are tested without their annotations (promtool compares those too, and they hold
    the bundle's digest): what fires and on which labels is the point."""
    document = yaml.safe_load(rules.read_text(encoding="utf-8"))
    groups = document["spec"]["groups"] if "spec" in document else document["groups"]
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    bare = rules.with_name(rules.stem + "-bare.yml")
    bare.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    test = {
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in series],
        "alert_rule_test": [
            {
                "eval_time": eval_time,
                "alertname": name,
                "exp_alerts": [{"exp_labels": dict(labels)} for labels in expected],
            }
            for name, expected in firing.items()
        ],
    }
    spec = {"rule_files": [str(bare)], "evaluation_interval": "1m", "tests": [test]}
    return _run(spec, rules.with_name(rules.stem + "-test.yml"))


def expr_values(
    tmp: Path,
    expr: str,
    series: Series,
    expected: Sequence[tuple[str, float]],
    eval_time: str,
    interval: str = "1m",
) -> subprocess.CompletedProcess[str]:
    """promtool's answer to: `expr` at `eval_time` gives exactly these (labels, value)
    samples (none: an empty result)."""
    test = {
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": [
            {
                "expr": expr,
                "eval_time": eval_time,
                "exp_samples": [{"labels": labels, "value": value} for labels, value in expected],
            }
        ],
    }
    return _run({"tests": [test]}, tmp / "promql-test.yml")


GOT_ANNOTATIONS = re.compile(r"got:\[\s*0:\s*Labels:\{.*?\}\s*Annotations:\{(.*?)\}\s*\]", re.S)
ANNOTATION = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def rendered_annotations(rules: Path, series: Series, alert: str, eval_time: str) -> dict[str, str]:
    """The annotations of `alert` as Prometheus renders them (their templates run) at
    `eval_time`: promtool prints them when they differ from an expectation, so one that
    cannot match is given. Empty when the alert does not fire."""
    test = {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "alert_rule_test": [
            {
                "eval_time": eval_time,
                "alertname": alert,
                "exp_alerts": [{"exp_labels": {}, "exp_annotations": {"_": "_"}}],
            }
        ],
    }
    spec = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [test]}
    run = _run(spec, rules.with_name(rules.stem + "-render.yml"))
    found = GOT_ANNOTATIONS.search(run.stdout + run.stderr)
    if found is None:
        return {}
    return {k: json.loads(f'"{v}"') for k, v in ANNOTATION.findall(found.group(1))}
