"""Bundles for the decision conformance suite, made the way users make them.

- `env`: `golive env` on captured files (real H200 host/container facts, real startup logs of
  vLLM 0.24 on two H200s and vLLM 0.32 on the CPU, a real NCCL failure and CUDA OOM message)
  and their mutations.
- `programme` / `section`: sealed bundles whose checks are those of a real run (the CPU demo
  in `tests/data/accepted`, the H200 run in `tests/data/vllm-gpu-0.24-h200x2`) with the
  mutation a scenario names. The decision is offline logic over a bundle, so each scenario
  fixes the evidence and asks golive what it decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from golive.checks.context import CheckContext
from golive.cli.main import main
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Status
from golive.verdict.document import VerdictDocument
from golive.verdict.scope import PROGRAMME, Scope
from tests.conftest import never_better

DATA = Path(__file__).parent.parent / "data"
GPU = DATA / "vllm-gpu-0.24-h200x2"
CPU_LOG = DATA / "vllm-cpu-0.32/startup.log"


def recorded(path: Path) -> list[CheckResult]:
    """The checks of a real run's verdict."""
    data = json.loads(path.read_text())
    return VerdictDocument.from_json(data).results()


def demo_checks() -> list[CheckResult]:
    """`golive demo` on the real CPU vLLM (Qwen + hermes): the whole programme."""
    return recorded(DATA / "accepted/verdict.json")


def proven(checks: Iterable[CheckResult]) -> list[CheckResult]:
    """The same run with every gap closed and every warn resolved: what go-live looks like
    (host evidence given, the auto-tool-choice defect fixed)."""
    out = []
    for check in checks:
        if check.status not in (Status.WARN, Status.NO_DATA):
            out.append(check)
            continue
        out.append(
            dataclasses.replace(
                check,
                status=Status.PASS,
                classification=None,
                limits=dataclasses.replace(check.limits, disable_feature=None),
            )
        )
    return out


def mutate(checks: Sequence[CheckResult], check_id: str, **changes: Any) -> list[CheckResult]:
    """Replace one check's fields (status, critical, measurements, summary)."""
    assert any(c.id == check_id for c in checks), check_id
    return [dataclasses.replace(c, **changes) if c.id == check_id else c for c in checks]


def drop(checks: Sequence[CheckResult], prefix: str) -> list[CheckResult]:
    return [c for c in checks if not c.id.startswith(prefix)]


def add(checks: Sequence[CheckResult], *extra: CheckResult) -> list[CheckResult]:
    return [*checks, *extra]


async def sealed(
    out: Path,
    checks: Sequence[CheckResult],
    scope: Scope = PROGRAMME,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A sealed bundle holding `checks`, decided by golive; its verdict.json."""

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return list(checks)

    config = load_config(None, dict(settings or {}))
    command = "run" if scope == PROGRAMME else "-".join(scope)
    verdict = await judge(config, out, command, programme, scope, require_target=False)
    again = rederive(out)
    # the checks carry no evidence, so golive decide cannot agree; it must never do better
    assert never_better(again), again.problems[:8]
    return verdict.data


def env(out: Path, *argv: str) -> dict[str, Any]:
    """`golive env ARGS --out OUT` on files, as an SRE runs it; its verdict.json."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["env", *argv, "--out", str(out), "--json"])
    verdict: dict[str, Any] = json.loads((out / "verdict.json").read_text())
    assert code == verdict["exit_code"]
    return verdict


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def json_edit(source: Path, dest: Path, **changes: Any) -> Path:
    data = json.loads(source.read_text())
    data.update(changes)
    return write(dest, json.dumps(data))


def fired(verdict: Mapping[str, Any]) -> dict[str, list[str]]:
    return {r["rule"]: r["checks"] for r in verdict["rules_fired"]}
