"""The commands that work on a saved bundle, offline: verify, decide (and decide --combine),
signoff, guardrails, rollback show, report."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rich.markup import escape

from golive.bundle.layout import REPORT_HTML, REPORT_MD
from golive.bundle.signing import load_public_key
from golive.bundle.store import verify as store_verify
from golive.cli.config_flags import command_config
from golive.cli.console import err
from golive.errors import ConfigError
from golive.operate.alert_scope import RUNBOOK
from golive.operate.guardrail_files import write_guardrails
from golive.operate.rollback import (
    accepted,
    artifact_gaps,
    overridden,
    registry_dir,
    rollback_target,
)
from golive.orchestration.rederive import rederive, require_rederived
from golive.orchestration.signature import sign_bundle
from golive.report.html import render_html
from golive.report.markdown import bundle_markdown, scope_line
from golive.results import Outcome
from golive.verdict.document import VerdictDocument, rules_of


def verify(args: argparse.Namespace) -> int:
    bundle: Path = args.bundle
    key_file: Path | None = args.key
    report = store_verify(bundle, None if key_file is None else load_public_key(key_file))
    signature = report.signature
    if signature is not None and signature.valid:
        print(f"{bundle}: manifest signed by {signature.key_fingerprint} (signature valid)")
    elif signature is not None:
        print(f"signature: {signature.problem}")
    if report.ok:
        print(f"{bundle}: intact (every file matches manifest-sha256.txt)")
        return 0
    for kind, paths in (
        ("altered", report.altered),
        ("missing", report.missing),
        ("extra", report.extra),
    ):
        for path in paths:
            print(f"{kind}: {path}")
    print(f"{bundle}: NOT intact", file=sys.stderr)
    return 1


def signoff(args: argparse.Namespace) -> int:
    trusted = list(args.trust_key)
    # --config, else $GOLIVE_CONFIG, and GOLIVE_SIGNOFF_TRUSTED_KEYS, as a run reads them
    trusted += [Path(k) for k in command_config(args, announce=False).signoff.trusted_keys]
    signed = sign_bundle(
        args.bundle,
        args.reviewer,
        Outcome(args.outcome),
        args.override_reason,
        args.registry,
        args.sign_key,
        trusted,
    )
    print(
        f"{args.bundle}: signed {signed.signature.outcome} by {signed.signature.reviewer} "
        f"at {signed.signature.signed_at}; re-sealed (see signoff.md)"
    )
    if signed.registered is not None:
        print(f"registered as a rollback artifact: {signed.registered}")
    return 0


def guardrails(args: argparse.Namespace) -> int:
    left_out = write_guardrails(
        args.bundle,
        args.output,
        args.ttft_slo,
        vouch=require_rederived,
        selectors=args.selector,
        form=args.format,
        runbook=args.runbook_url,
        trusted=args.trust_key,
        cache_floor=args.cache_floor,
    )
    for rule in left_out:
        err.print(f"left out: {escape(rule)}", highlight=False, soft_wrap=True)
    if args.runbook_url == RUNBOOK:
        err.print(
            "runbook links point at the placeholder YOUR-ORG: give --runbook-url where your "
            "copy of docs/runbook.md is served",
            highlight=False,
            soft_wrap=True,
        )
    check = {
        "rules": f"promtool check rules {args.output}",
        "prometheusrule": f"kubectl apply --dry-run=server -f {args.output}",
        "analysistemplate": f"kubectl apply --dry-run=server -f {args.output}",
    }[args.format]
    print(f"wrote {args.output} (check it with: {check})")
    return 0


def decide(args: argparse.Namespace) -> int:
    if args.combine:
        return _combine(args)
    if args.bundle is None:
        raise ConfigError("decide needs a BUNDLE to re-derive, or --combine B1 B2 ... --out DIR")
    result = rederive(args.bundle)
    derived = result.decision
    if args.json:
        print(
            json.dumps(
                {
                    "sealed": result.sealed.value,
                    "outcome": derived.outcome.value,
                    "rules_fired": [r.model_dump(mode="json") for r in rules_of(derived)],
                    "agrees": result.agrees,
                    "problems": list(result.problems),
                    "rejudged_from_evidence": list(result.rejudged),
                    "taken_as_sealed": list(result.as_sealed),
                },
                indent=2,
            )
        )
    else:
        print(f"{args.bundle}: re-derived {derived.outcome.value} (sealed {result.sealed.value})")
        for rule in derived.rules_fired:
            print(f"  {rule.outcome.value} ({rule.rule}): {', '.join(rule.check_ids)}")
        print(f"  judged again from the evidence: {', '.join(result.rejudged) or 'nothing'}")
        print(f"  taken as sealed ({len(result.as_sealed)}): {', '.join(result.as_sealed)}")
    for problem in result.problems:
        err.print(f"[red]disagrees:[/red] {escape(problem)}", highlight=False, soft_wrap=True)
    return 0 if result.agrees else 1


def _combine(args: argparse.Namespace) -> int:
    from golive.orchestration.combine import combine

    if args.bundle is not None:
        raise ConfigError("give the bundles after --combine, not before it")
    if args.out is None:
        raise ConfigError("decide --combine needs --out DIR for the combined bundle")
    policy = None if args.policy is None else str(args.policy)
    verdict = combine(
        args.combine,
        args.out,
        command_config(args, announce=False, overrides={"policy": policy}),
        args.max_age_days,
        assume_same_deployment=args.assume_same_deployment,
    )
    document = verdict.document
    if args.json:
        print(json.dumps(verdict.data, indent=2))
    else:
        parts = len(document.parts or ())
        print(f"combined {parts} bundles: {document.outcome} ({scope_line(document)})")
        for rule in document.rules_fired:
            print(f"  {rule.outcome} ({rule.rule}): {', '.join(rule.checks)}")
    err.print(f"bundle: {args.out}", highlight=False, soft_wrap=True)
    return verdict.outcome.exit_code


def rollback(args: argparse.Namespace) -> int:
    registry = registry_dir(args.registry)
    last = rollback_target(registry)
    by_override = [e for e in accepted(registry) if overridden(e)]
    unreachable = [e for e in accepted(registry) if not overridden(e) and artifact_gaps(e)]
    for entry in unreachable:  # registered before the rule, or written by hand
        print(
            f"not a rollback target: {entry.get('bundle')} lacks "
            + "; ".join(gap.split(" (")[0] for gap in artifact_gaps(entry)),
            file=sys.stderr,
        )
    if last is None:
        print(
            f"no accepted artifact in {registry}"
            + (f" other than {len(by_override)} accepted with override" if by_override else "")
            + (f" and {len(unreachable)} a rollback cannot reach" if unreachable else "")
            + ": sign an accepted bundle with golive signoff"
        )
        return 1
    if args.json:
        print(json.dumps(last, indent=2))
        return 0
    print(
        f"last accepted: {last['bundle']} ({last['outcome']}, {last['accepted_at']}, "
        f"by {last.get('reviewer')})"
    )
    print(f"  image: {last.get('image')}  digest: {last.get('image_digest')}")
    print(
        f"  vLLM {last.get('vllm_version')}; parsers {last.get('parsers')}; "
        f"parallel {last.get('parallel')}"
    )
    print(f"  runtime variables: {last.get('runtime_variables')}")
    print(f"  launch config digest: {last.get('launch_config_digest')}")
    print(
        "  launch command: "
        + (
            shlex.join(last["launch_command"])
            if last.get("launch_command")
            else "(not recorded: give --container-info with serve_command)"
        )
    )
    for entry in by_override:
        print(
            f"accepted with override (never the rollback target): {entry['bundle']} "
            f"({entry['outcome']} over a {entry.get('verdict_outcome')} verdict, "
            f"{entry['accepted_at']}, by {entry['reviewer']}: {entry.get('override_reason')})"
        )
    return 0


def report(args: argparse.Namespace) -> int:
    """Render report.html and report.md from a bundle into another directory (the sealed
    bundle is never rewritten)."""
    root: Path = args.bundle
    verdict = VerdictDocument.read(root)
    out: Path = args.output or root.with_name(root.name + "-report")
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_HTML).write_text(render_html(root, verdict), encoding="utf-8")
    (out / REPORT_MD).write_text(bundle_markdown(root, verdict), encoding="utf-8")
    print(f"wrote {out / 'report.html'} and {out / 'report.md'}")
    return 0
