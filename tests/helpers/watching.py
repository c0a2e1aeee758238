"""Helpers for the watch tests: an accepted bundle (the demo's verdict from the real CPU
vLLM: ceiling 4, no waiting, 80% prefix reuse), a registry holding an earlier accepted
artifact, and `golive watch` called like a user would."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from golive.cli.main import main
from golive.operate.rollback import register

DATA = Path(__file__).parents[1] / "data" / "accepted"


def accepted_bundle(root: Path) -> Path:
    (root / "metrics").mkdir(parents=True)
    shutil.copy(DATA / "verdict.json", root / "verdict.json")
    shutil.copy(DATA / "capacity-steps.jsonl", root / "metrics/capacity-steps.jsonl")
    return root


def registry_with_previous(tmp_path: Path) -> Path:
    """A registry whose last accepted artifact is an earlier deployment of the same model."""
    previous = accepted_bundle(tmp_path / "previous")
    (previous / "environment").mkdir()
    (previous / "environment/container.json").write_text(
        json.dumps(
            {
                "image": "vllm/vllm-openai:v0.31.0@sha256:" + "ab" * 32,
                "serve_command": ["vllm", "serve", "qwen", "--enable-prefix-caching"],
                "environment": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "never-copied"},
            }
        )
    )
    signature = {
        "reviewer": "Ana",
        "signed_at": "2026-11-01T10:00:00+00:00",
        "outcome": "go-live",
        "bundle_digest": "sha256:" + "cd" * 32,
    }
    registry = tmp_path / "registry"
    register(previous, signature, registry)
    return registry


async def golive_watch(
    url: str, accepted: Path, out: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    argv = ["watch", "--target", url, "--accepted", str(accepted), "--out", str(out), "--json"]
    code = await asyncio.to_thread(main, [*argv, *extra])
    return code, json.loads((out / "watch/summary.json").read_text())


def rules(summary: dict[str, Any]) -> list[str]:
    return [t["rule"] for t in summary["triggers"]]
