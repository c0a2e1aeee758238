"""Inputs of the guardrails tests: a hand-made accepted bundle (the demo's accepted verdict,
its ramp steps and an engine scrape, sealed, without the rest of the evidence) and its
guardrails written as `golive guardrails` writes them, past the gate that refuses a bundle
`golive decide` does not re-derive (such a bundle re-derives to hold: its checks lack their
evidence). The gate itself is tested on copies of tests/data/golden-demo."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from golive.bundle.store import Bundle
from golive.operate.alert_scope import RUNBOOK, parse_selectors
from golive.operate.guardrail_files import assemble, guardrails_text

DATA = Path(__file__).parents[1] / "data"
ACCEPTED = DATA / "accepted"


def synthetic_bundle(
    tmp_path: Path,
    prom: str | None = None,
    pods: dict[str, Any] | None = None,
    **verdict_changes: object,
) -> Path:
    """The accepted verdict (with `verdict_changes`), its steps and one scrape, sealed."""
    root = tmp_path / "bundle"
    (root / "metrics").mkdir(parents=True)
    verdict = json.loads((ACCEPTED / "verdict.json").read_text())
    verdict.update(verdict_changes)
    (root / "verdict.json").write_text(json.dumps(verdict))
    shutil.copy(ACCEPTED / "capacity-steps.jsonl", root / "metrics/capacity-steps.jsonl")
    (root / "metrics/after.prom").write_text(prom or (ACCEPTED / "after-agent.prom").read_text())
    if pods is not None:
        (root / "environment").mkdir()
        (root / "environment/k8s-pods.json").write_text(json.dumps(pods))
    Bundle(root).seal()
    return root


def generate(
    root: Path,
    out: Path,
    ttft_slo_s: float | None = None,
    selectors: Sequence[str] = (),
    form: str = "rules",
    runbook: str = RUNBOOK,
    cache_floor: float | None = None,
) -> list[str]:
    """Write `root`'s guardrails to `out` in `form`; what was left out."""
    accepted = assemble(root, runbook)
    given = parse_selectors(selectors)
    text, left_out = guardrails_text(accepted, given, form, ttft_slo_s, cache_floor)
    out.write_text(text, encoding="utf-8")
    return left_out
