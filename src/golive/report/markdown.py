"""A readable Markdown summary of a verdict: outcome, why, and every check."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from golive.bundle.layout import (
    CAPACITY_REQUEST_MD,
    CAPACITY_STEPS,
    CAPACITY_WATCHDOG,
    CHAIN,
    METRIC_REFERENCE,
)
from golive.bundle.store import BundleReader, locate
from golive.quantiles import samples_needed
from golive.report.latency_section import latency_section
from golive.report.workload import workload_section
from golive.verdict.document import Limits, VerdictDocument, tested_sentence

_MARK = {
    "pass": "PASS",
    "warn": "WARN",
    "fail": "FAIL",
    "no_data": "NO DATA",
    "error": "ERROR",
    "skipped": "skipped",
}


def bundle_markdown(root: Path, verdict: VerdictDocument) -> str:
    """report.md for the bundle at `root`: the verdict, its version chain and load windows."""
    chain_path = locate(root, CHAIN)
    chain = json.loads(chain_path.read_text()) if chain_path.is_file() else None
    text = render_markdown(
        verdict, chain, _rows(root, CAPACITY_WATCHDOG), _rows(root, CAPACITY_STEPS)
    )
    text += latency_section(BundleReader(root), verdict)
    text += workload_section(BundleReader(root))
    text += _reference_section(locate(root, METRIC_REFERENCE))
    request = locate(root, CAPACITY_REQUEST_MD)
    if request.is_file():  # the capacity request, written with an expand-capacity verdict
        text += "\n" + request.read_text(encoding="utf-8").replace("# ", "## ", 1)
    return text


def _reference_section(path: Path) -> str:
    """The metrics the judgement read, as the engine's own HELP texts describe them."""
    if not path.is_file():
        return ""
    reference = json.loads(path.read_text())
    docs = reference.get("documentation") or "vLLM version unknown: no documentation page"
    lines = [
        "",
        f"## Metrics relied on (vLLM {reference.get('vllm_version') or 'unknown'}; {docs})",
        "",
        "| metric | exposed as | the engine's HELP text | read for |",
        "|---|---|---|---|",
    ]
    for row in reference.get("metrics") or ():
        exposed = f"`{row['exposed']}`" if row.get("exposed") else "**absent**"
        help_text = " ".join(str(row.get("help") or row.get("absent") or "").split())
        help_text = help_text.replace("|", "\\|")
        lines.append(f"| {row['metric']} | {exposed} | {help_text} | {row.get('read_for')} |")
    return "\n".join(lines) + "\n"


def _rows(root: Path, rel: str) -> list[dict[str, Any]]:
    path = locate(root, rel)
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _identity_lines(verdict: VerdictDocument) -> list[str]:
    """The deployment the evidence shows, and an assumption a reviewer made about it."""
    out = []
    found = verdict.identity or {}
    shown = {k: v for k, v in found.items() if v is not None and k != "problems"}
    if shown:
        out.append("- deployment: " + ", ".join(f"{k} `{v}`" for k, v in shown.items()))
    for problem in found.get("problems") or ():
        out.append(f"- deployment: **{problem}**")
    assumed = verdict.assumed_same_deployment
    if assumed:
        unknown = ", ".join(assumed.get("unknown_in_some_parts") or ()) or "none"
        out.append(
            f"- **assumed one deployment** (--assume-same-deployment): {assumed.get('reason')} "
            f"(unknown in some parts: {unknown})"
        )
    return out


def render_markdown(
    verdict: VerdictDocument,
    chain: Mapping[str, Any] | None = None,
    windows: Sequence[Mapping[str, Any]] = (),
    steps: Sequence[Mapping[str, Any]] = (),
) -> str:
    lines = [
        f"# golive verdict: **{verdict.outcome}**",
        "",
        f"- target: `{verdict.target}`",
        f"- profile: `{verdict.profile}`",
        f"- command: `{verdict.command}`",
        f"- started: {verdict.started_at}  finished: {verdict.finished_at}",
        f"- golive {verdict.golive_version}",
        f"- scope: {scope_line(verdict)}",
        *_identity_lines(verdict),
        "",
        *(
            [
                "> **A demo** (`golive demo`): a small model on the CPU with short windows and "
                "few repeats, to show golive's programme and bundle. Its verdict judges that "
                "demo target only, never a deployment.",
                "",
            ]
            if verdict.command == "demo"
            else []
        ),
        "## Why",
        "",
    ]
    rules = verdict.rules_fired
    if not rules:
        lines.append(
            "No decision rule fired: the whole programme ran and every check passed with "
            "saved evidence."
        )
    for rule in rules:
        lines.append(
            f"- **{rule.outcome}** ({rule.rule}): {rule.reason} — checks: "
            + ", ".join(f"`{c}`" for c in rule.checks)
        )
    lines += _limits(verdict.limits)
    lines += ["", tested_sentence(verdict.tested)]
    for waiver in verdict.waivers:
        lines.append(
            f"- warn `{waiver.check}` waived by the policy: {waiver.reason} (owner {waiver.owner})"
        )
    for skipped in verdict.skipped_by_config:
        lines.append(f"- `{skipped.check}` skipped by the config: {skipped.reason}")
    lines += [
        "",
        "## Checks",
        "",
        "| check | status | critical | summary | evidence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in verdict.checks:
        evidence = ", ".join(f"`{e}`" for e in check.evidence)
        summary = check.summary.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| `{check.id}` | {_MARK.get(check.status, check.status)} | "
            f"{'yes' if check.critical else 'no'} | {summary} | {evidence} |"
        )
    if chain is not None:
        lines += ["", *_chain_section(chain)]
    if windows:
        lines += ["", *load_windows(windows)]
    if steps:
        lines += ["", *latency_by_step(steps)]
    actions = verdict.actions
    if actions:
        lines += [
            "",
            "## Actions",
            "",
            "| check | status | owner | deadline | rollback |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| `{a.check}` | {a.status or ''} | {a.owner} | {a.deadline} | {a.rollback} |"
            for a in actions
        ]
    return "\n".join(lines) + "\n"


def latency_by_step(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ramp's latency percentiles with their sample counts and 95% upper bounds; a p95
    from too few requests is shown, marked, and bounds no limit."""
    needed = samples_needed(95)
    lines = [
        "## Latency by ramp step",
        "",
        f"A p95 is an upper bound at 95% confidence only from {needed} requests or more; one "
        "from fewer is shown but marked, and no limit is set from it.",
        "",
        "| concurrency | requests | e2e p50 s | e2e p95 s (bound) | TTFT p95 s (bound) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for step in steps:
        lines.append(
            f"| {step.get('concurrency')} | {step.get('completed')} | "
            f"{_seconds(step.get('e2e_p50_s'))} | "
            f"{_bounded(step, 'e2e_p95_s', 'e2e_p95_upper_s', 'e2e_samples', needed)} | "
            f"{_bounded(step, 'ttft_p95_s', 'ttft_p95_upper_s', 'ttft_samples', needed)} |"
        )
    return lines


def _seconds(value: Any) -> str:
    return f"{value:.3f}" if _figure(value) else "n/a"


def _figure(value: Any) -> bool:
    """A number to show (NaN and Infinity, as a hand-edited JSON line may hold, are none)."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _bounded(step: Mapping[str, Any], key: str, upper: str, count: str, needed: int) -> str:
    value = step.get(key)
    if not _figure(value):
        return "n/a"
    samples = step.get(count)
    if samples is None:  # a bundle from before the counts were kept
        return f"{value:.3f} (samples not recorded)"
    bound = step.get(upper)
    if _figure(bound):
        return f"{value:.3f} (≤ {bound:.3f}, n={samples})"
    return f"{value:.3f} (n={samples} < {needed}: not a bound)"


def load_windows(windows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each capacity load window: what it was asked for and what it carried (a window cut
    short is never judged; this table lets a reader see it)."""
    short = [w for w in windows if w.get("stopped_by") != "duration"]
    lines = [
        "## Load windows",
        "",
        f"{len(windows) - len(short)} of {len(windows)} window(s) carried their load for the "
        "whole duration"
        + (
            "; ended early: "
            + ", ".join(
                f"{w.get('phase')} c{w.get('concurrency_cap')} ({w.get('stopped_by')})"
                for w in short
            )
            if short
            else "."
        ),
        "",
        "| phase | concurrency | asked s | ran s | ended by | requests / cap | peak in flight "
        "| golive send lag mean / p99, loop lag p99 ms | golive CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {w.get('phase')} | {w.get('concurrency_cap')} | {w.get('duration_s')} | "
        f"{w.get('wall_s')} | {w.get('stopped_by')} | {w.get('requests')} / "
        f"{w.get('request_cap')} | {w.get('peak_in_flight')} | {_client(w)} |"
        for w in windows
    ]
    bottlenecked = [w["client_bottleneck"] for w in windows if w.get("client_bottleneck")]
    if bottlenecked:
        lines += ["", f"Not judged: {bottlenecked[0]}."]
    return lines


def _client(window: Mapping[str, Any]) -> str:
    figures = window.get("client")
    if not isinstance(figures, Mapping):
        return "n/a | n/a"
    cpu = figures.get("cpu_share")
    send = f"{figures.get('send_lag_mean_ms', 'n/a')} / {figures.get('send_lag_p99_ms')}"
    return f"{send}, {figures.get('loop_lag_p99_ms')} | " + ("n/a" if cpu is None else f"{cpu:.0%}")


def scope_line(verdict: VerdictDocument) -> str:
    """What the bundle covers, in words (verdict.json `scope`)."""
    scope = verdict.scope
    if scope == "programme":
        return "the whole programme (a go-live decision)"
    ran = ", ".join(scope) if isinstance(scope, tuple) else "not recorded"
    missing = ", ".join(verdict.sections_missing)
    return f"sections {ran} only; still missing before a go-live decision: {missing}"


def chain_rows(chain: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(layer, found, expected) rows of the version chain, for the Markdown and HTML reports."""
    expected = chain.get("expected") or {}
    container = chain.get("container") or {}
    startup = chain.get("startup") or {}
    live = chain.get("live") or {}
    hosts = chain.get("hosts") or []
    drivers = ", ".join(f"{h['node']}: {h['driver']} (CUDA {h['cuda_driver']})" for h in hosts)
    rows: list[tuple[str, Any, Any]] = [
        ("image", chain.get("image"), expected.get("image")),
        (
            "vLLM (live / log / container)",
            f"{live.get('vllm_version')} / {startup.get('vllm_version')} / {container.get('vllm')}",
            f">= {expected.get('min_vllm')}" if expected.get("min_vllm") else None,
        ),
        (
            "container CUDA (torch / runtime)",
            f"{container.get('torch_cuda')} / {container.get('cudart')}" if container else None,
            f"{expected.get('cuda_major')}.x" if expected.get("cuda_major") else None,
        ),
        (
            "host drivers",
            drivers or None,
            f">= R{expected.get('min_driver_major')}" if expected.get("min_driver_major") else None,
        ),
        (
            "GPUs",
            ", ".join(
                f"{h['node']}: {len(h['gpus'])} x {', '.join(sorted(set(h['gpus'])))}"
                for h in hosts
            )
            or None,
            f">= {expected.get('min_gpus')}" if expected.get("min_gpus") else None,
        ),
        (
            "parsers (tool / reasoning)",
            f"{startup.get('tool_call_parser')} / {startup.get('reasoning_parser')}"
            if startup
            else None,
            f"{expected.get('tool_parser')} / {expected.get('reasoning_parser')}"
            if expected.get("tool_parser")
            else None,
        ),
        (
            "prefix caching",
            startup.get("prefix_caching")
            if startup
            else live.get("cache_config", {}).get("enable_prefix_caching"),
            "required" if expected.get("prefix_caching_required") else None,
        ),
        ("parallel", startup.get("parallel") if startup else None, None),
    ]
    return rows


def _chain_section(chain: Mapping[str, Any]) -> list[str]:
    """The version chain, layer by layer: what each layer says and what the profile expects."""
    rows = chain_rows(chain)
    lines = [
        f"## Version chain (profile `{chain.get('profile')}`)",
        "",
        "| layer | found | expected |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {_cell(found)} | {_cell(want)} |" for name, found, want in rows]
    lines += ["", "| link | status | finding |", "| --- | --- | --- |"]
    for link in chain.get("links") or []:
        summary = str(link["summary"]).replace("|", "\\|")
        lines.append(
            f"| `{link['check']}` | {_MARK.get(link['status'], link['status'])} | {summary} |"
        )
    return lines


def _cell(value: Any) -> str:
    return (
        "—"
        if value in (None, "", "None / None", "None / None / None")
        else str(value).replace("|", "\\|")
    )


def _limits(limits: Limits) -> list[str]:
    """The envelope to go live inside: traffic caps and features to switch off."""
    if not limits.any():
        return []
    lines = ["", "## Limits to go live with", ""]
    names = {"max_concurrency": "max concurrency", "max_context": "max context (tokens)"}
    for key, value in limits.named():
        lines.append(f"- {names[key]}: **{value}**")
    for feature in limits.disable_features:
        lines.append(f"- disable or rate-limit: **{feature}**")
    return lines
