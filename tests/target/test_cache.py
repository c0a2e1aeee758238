"""`golive cache` on the real CPU vLLM: reuse proven, reuse absent, a test too small, and
metrics out of reach."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from golive.bundle.layout import CACHE_STEPS
from golive.bundle.store import Bundle
from golive.cli.main import main
from golive.orchestration.rederive import rederive
from golive.results import EXIT_USAGE, Outcome
from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from tests.helpers.live_sections import golive_cache
from tests.helpers.scenario import SHORT_LOAD, golive_run, rules
from tests.helpers.watching import accepted_bundle


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


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def nocache_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    paths = await ensure_target("qwen")
    # the API's cached_tokens on too: the corroboration's "caching off" half is
    # test_prefix_caching_off_is_hold, on this server (not another one: ~25 s on 2 cores).
    # The accepted deployment's context length (4096): the watch refuses a server serving
    # another, and this one stands for that deployment restarted without prefix caching.
    target = await start_target(
        paths,
        ServeOptions(prefix_caching=False, prompt_tokens_details=True),
        tmp_path_factory.mktemp("nocache"),
    )
    try:
        yield target
    finally:
        await stop_target(target)


async def test_prefix_caching_off_is_hold(nocache_target: RunningTarget, tmp_path: Path) -> None:
    """A server with prefix caching off shows no measured reuse: cache not accepted, hold;
    the API's cached_tokens (this server reports them) agree that nothing was reused."""
    code, verdict = await golive_cache(nocache_target, tmp_path / "b", "--prefix-tokens", "256")
    reuse = _checks(verdict)["cache.prefix_reuse"]
    assert code == Outcome.HOLD.exit_code
    assert "no measured reuse" in reuse["summary"]
    assert reuse["measurements"]["warm_engine_reused_max"] == 0
    assert reuse["measurements"]["warm_cached_tokens_max"] == 0


async def test_golive_run_with_prefix_caching_off_is_hold(
    nocache_target: RunningTarget, tmp_path: Path
) -> None:
    """The whole programme on a server without prefix caching: the cache proof holds it."""
    code, verdict = await golive_run(
        nocache_target, tmp_path / "b", *SHORT_LOAD, "--max-context", "1024"
    )
    assert code == Outcome.HOLD.exit_code
    fired = rules(verdict)
    assert "cache.prefix_reuse" in fired["critical-failure"]
    checks = _checks(verdict)
    assert checks["agent.one_arg.required"]["status"] == "pass"
    assert any(c.startswith("capacity.") for c in checks)


async def test_a_server_relaunched_without_prefix_caching_is_not_watched(
    nocache_target: RunningTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The accepted deployment relaunched without prefix caching (same model, same vLLM, no
    --log given): its own /metrics says so (vllm:cache_config_info), so the watch is refused
    before its first interval, naming the setting — not watched as the accepted one. (A
    cache that stops hitting under the same launch fires cache-regression:
    tests/integration/test_watch_restarts.py.)"""
    accepted = await accepted_bundle(tmp_path / "accepted")
    argv = ["watch", "--target", nocache_target.url, "--accepted", str(accepted)]
    argv += ["--out", str(tmp_path / "w"), "--duration", "5", "--interval", "1"]
    code = await asyncio.to_thread(main, argv)
    assert code == EXIT_USAGE
    refused = capsys.readouterr().err
    assert (
        "engine cache setting enable_prefix_caching (vllm:cache_config_info): 'False' here, "
        in (refused)
    )
    assert "'True' accepted" in refused
