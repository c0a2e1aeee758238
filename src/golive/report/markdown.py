"""A readable Markdown summary of a verdict: outcome, why, and every check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MARK = {
    "pass": "PASS",
    "warn": "WARN",
    "fail": "FAIL",
    "no_data": "NO DATA",
    "error": "ERROR",
    "skipped": "skipped",
}


def render_markdown(verdict: Mapping[str, Any]) -> str:
    lines = [
        f"# golive verdict: **{verdict['outcome']}**",
        "",
        f"- target: `{verdict.get('target')}`",
        f"- profile: `{verdict.get('profile')}`",
        f"- command: `{verdict.get('command')}`",
        f"- started: {verdict.get('started_at')}  finished: {verdict.get('finished_at')}",
        f"- golive {verdict.get('golive_version')}",
        "",
        "## Why",
        "",
    ]
    rules = verdict.get("rules_fired") or []
    if not rules:
        lines.append("No decision rule fired: every check passed with saved evidence.")
    for rule in rules:
        lines.append(
            f"- **{rule['outcome']}** ({rule['rule']}): {rule['reason']} — checks: "
            + ", ".join(f"`{c}`" for c in rule["checks"])
        )
    lines += [
        "",
        "## Checks",
        "",
        "| check | status | critical | summary | evidence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in verdict.get("checks") or []:
        evidence = ", ".join(f"`{e}`" for e in check.get("evidence") or [])
        summary = str(check["summary"]).replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| `{check['id']}` | {_MARK.get(check['status'], check['status'])} | "
            f"{'yes' if check['critical'] else 'no'} | {summary} | {evidence} |"
        )
    actions = verdict.get("actions") or []
    if actions:
        lines += [
            "",
            "## Actions",
            "",
            "| check | owner | deadline | rollback |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| `{a['check']}` | {a['owner']} | {a['deadline']} | {a['rollback']} |"
            for a in actions
        ]
    return "\n".join(lines) + "\n"
