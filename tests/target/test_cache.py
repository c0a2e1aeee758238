"""`golive cache` on the real CPU vLLM: reuse proven, a test too small, and metrics out of
reach. Reuse absent (a server without prefix caching) is test_smollm2_server.py's, and the API's
cached_tokens agreeing with the counters test_tight_server.py's."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CACHE_STEPS
from golive.bundle.store import Bundle
from golive.cli.main import main
from golive.orchestration.rederive import rederive
from golive.results import Outcome
from golive.target.server import RunningTarget
from tests.helpers.live_sections import golive_cache


def _checks(verdict: dict[str, Any]) -> dict[str, Any]:
    return {c["id"]: c for c in verdict["checks"]}


@pytest.mark.tampers_bundle  # it edits a copy of its bundle: decide must catch that
async def test_prefix_caching_on_is_accepted(real_target: RunningTarget, tmp_path: Path) -> None:
    """Cold pays, warm reuses what the engine's counters say, controls invalidate — on a
    server with vLLM's default flags (no --enable-prompt-tokens-details, as in production
    and the Kimi K3 recipe): the API reports no cached_tokens and reuse is still proven."""
    code, verdict = await golive_cache(real_target, tmp_path / "b", "--prefix-tokens", "640")
    checks = _checks(verdict)
    reuse = checks["cache.prefix_reuse"]
    assert code == 0, reuse["summary"]
    assert verdict["outcome"] == "section-passed"
    assert reuse["status"] == "pass"
    assert "the API reports no cached_tokens" in reuse["summary"]
    m = reuse["measurements"]
    assert m["cold_cached_tokens"] is None  # not reported: never written as 0
    assert m["warm_cached_tokens_min"] is None
    assert m["cold_d_hits"] == 0
    assert m["warm_engine_reused_min"] >= 384  # at least three 128-token blocks
    assert m["warm_d_hits_total"] >= 3 * 384
    assert m["ttft_cold_median_s"] > m["ttft_warm_median_s"]
    controls = checks["cache.controls"]["measurements"]
    assert controls["system_prompt_reused_tokens"] == 0
    assert controls["whitespace_reused_tokens"] == 0
    assert "block-granular (128-token blocks)" in checks["cache.retention"]["summary"]
    steps = [
        json.loads(x) for x in (tmp_path / "b/metrics/cache-steps.jsonl").read_text().splitlines()
    ]
    assert len(steps) == 1 + 1 + 3 + 5 + 1
    # the warm-up came first, behind a prefix of its own: nothing of it was reused, and the
    # cold request after it found nothing of the warm-up either
    assert [s["step"] for s in steps[:2]] == ["warmup", "cold-0"]
    assert steps[0]["d_hits"] == 0
    assert m["warmup_ttft_s"] == steps[0]["ttft_s"]
    assert abs(steps[0]["prompt_tokens"] - steps[1]["prompt_tokens"]) <= 8
    assert "cache.prefix_reuse" in (tmp_path / "b/report.md").read_text()
    await _assert_rederives(tmp_path / "b")
    # an edited evidence file is caught even with the manifest recomputed: the engine's
    # counters of the warm requests zeroed in the steps no longer match the scrapes behind
    # them, so reuse is not judged from them (no_data) and the section holds
    edited = tmp_path / "edited"
    shutil.copytree(tmp_path / "b", edited)
    rows = [
        {**s, "d_hits": 0.0, "d_prompt_tokens_cached": 0.0} if s["step"].startswith("warm-") else s
        for s in steps
    ]
    (edited / CACHE_STEPS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    Bundle(edited).seal()
    again = rederive(edited)
    assert not again.agrees
    assert not any("manifest" in p for p in again.problems), again.problems
    assert "cache.prefix_reuse status: sealed 'pass', re-derived 'no_data'" in again.problems
    reuse_again = next(c for c in again.checks if c.id == "cache.prefix_reuse")
    assert "does not match the scrapes and records behind it" in reuse_again.summary
    assert "(warm-0): d_hits 0.0, but its scrapes say" in reuse_again.summary
    assert again.decision.outcome is Outcome.HOLD


async def _assert_rederives(bundle: Path) -> None:
    """`golive decide BUNDLE` judges the cache checks again from the bundle's evidence and
    reproduces each one (status, summary, measurements) and the outcome."""
    code = await asyncio.to_thread(main, ["decide", str(bundle), "--json"])
    again = rederive(bundle)
    assert again.agrees, again.problems
    assert code == 0
    assert "cache" in again.rejudged
    assert not any(c.startswith("cache.") for c in again.as_sealed)
    assert "cache" in json.loads((bundle / "verdict.json").read_text())["judged_from_evidence"]


async def test_prefix_shorter_than_a_block_blames_the_test(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """A shared prefix shorter than one cache block holds as a test too small, saying it proves
    nothing about the runtime."""
    code, verdict = await golive_cache(real_target, tmp_path / "b", "--prefix-tokens", "64")
    reuse = _checks(verdict)["cache.prefix_reuse"]
    assert code == Outcome.HOLD.exit_code
    assert "test too small" in reuse["summary"]
    assert "says nothing about the runtime" in reuse["summary"]
    await _assert_rederives(tmp_path / "b")


async def test_metrics_out_of_reach_is_no_data(real_target: RunningTarget, tmp_path: Path) -> None:
    """Engine metrics out of reach make reuse no_data and hold, never a pass on the flag alone."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    code, verdict = await golive_cache(
        real_target, tmp_path / "b", "--metrics-url", f"http://127.0.0.1:{closed}/metrics"
    )
    reuse = _checks(verdict)["cache.prefix_reuse"]
    assert reuse["status"] == "no_data"
    assert verdict["outcome"] != "go-live"
    assert code == Outcome.HOLD.exit_code
    await _assert_rederives(tmp_path / "b")
