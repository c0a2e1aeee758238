"""A second model, SmolLM2, on a server without prefix caching that reports the API's
cached_tokens (--enable-prompt-tokens-details, off by default): its schema-breaking tool
calls hold, the cache proof finds no reuse (and the API agrees), the watch refuses it as the
accepted deployment, and one whole programme holds on both defects. One server for the four
(each start is ~25-55 s of the suite), and one programme run judges both defects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from golive.cli.main import main
from golive.results import EXIT_USAGE, Outcome
from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from tests.helpers.live_sections import golive_cache
from tests.helpers.scenario import SHORT_LOAD, golive_run, rules
from tests.helpers.watching import accepted_bundle


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def smollm2_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    """SmolLM2 without prefix caching, the API's cached_tokens reported (the corroboration's
    "caching on" half is test_tight_server.py's, on a server that reports the field too)."""
    paths = await ensure_target("smollm2")
    options = ServeOptions(prefix_caching=False, prompt_tokens_details=True)
    target = await start_target(paths, options, tmp_path_factory.mktemp("smollm2"))
    try:
        yield target
    finally:
        await stop_target(target)


def _checks(verdict: dict[str, Any]) -> dict[str, Any]:
    return {c["id"]: c for c in verdict["checks"]}


async def test_smollm2_schema_failures_hold(smollm2_target: RunningTarget, tmp_path: Path) -> None:
    """The weak model's schema-breaking tool calls on critical cases hold."""
    out = tmp_path / "b"
    argv = ["agent", "--target", smollm2_target.url, "--out", str(out), "--temperature", "0"]
    argv += ["--json", "--repeat", "2", "--concurrency", "8"]
    argv += ["--case", "one_arg.required", "--case", "structured"]
    code = await asyncio.to_thread(main, argv)
    verdict = json.loads((out / "verdict.json").read_text())
    checks = _checks(verdict)
    assert code == Outcome.HOLD.exit_code
    assert verdict["rules_fired"][0]["rule"] == "agent-protocol-failure"
    required = checks["agent.one_arg.required"]
    assert required["status"] == "fail"
    assert "arguments." in required["measurements"]["signatures"]
    assert checks["agent.structured"]["status"] == "fail"
    assert "structured." in checks["agent.structured"]["measurements"]["signatures"]
    assert "Repeated failure on a critical path" in required["summary"]


async def test_prefix_caching_off_is_hold(smollm2_target: RunningTarget, tmp_path: Path) -> None:
    """A server with prefix caching off shows no measured reuse: cache not accepted, hold;
    the API's cached_tokens (this server reports them) agree that nothing was reused."""
    code, verdict = await golive_cache(smollm2_target, tmp_path / "b", "--prefix-tokens", "256")
    reuse = _checks(verdict)["cache.prefix_reuse"]
    assert code == Outcome.HOLD.exit_code
    assert "no measured reuse" in reuse["summary"]
    assert reuse["measurements"]["warm_engine_reused_max"] == 0
    assert reuse["measurements"]["warm_cached_tokens_max"] == 0


async def test_a_server_without_prefix_caching_is_not_watched(
    smollm2_target: RunningTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server without prefix caching (and serving another model; no --log given) is not the
    accepted deployment: its own /metrics says the cache setting (vllm:cache_config_info)
    and /v1/models the model, so the watch is refused before its first interval, naming each
    — not watched as the accepted one. (A cache that stops hitting under the same launch
    fires cache-regression: tests/integration/test_watch_restarts.py.)"""
    accepted = await accepted_bundle(tmp_path / "accepted")
    argv = ["watch", "--target", smollm2_target.url, "--accepted", str(accepted)]
    argv += ["--out", str(tmp_path / "w"), "--duration", "5", "--interval", "1"]
    code = await asyncio.to_thread(main, argv)
    assert code == EXIT_USAGE
    refused = capsys.readouterr().err
    assert (
        "engine cache setting enable_prefix_caching (vllm:cache_config_info): 'False' here, "
        "'True' accepted" in refused
    )
    assert "model: 'smollm2" in refused, refused


async def test_golive_run_with_the_weak_model_without_caching_holds_on_both(
    smollm2_target: RunningTarget, tmp_path: Path
) -> None:
    """golive run on the weak model without prefix caching holds, citing both defects: its
    tool-call protocol failure and the cache proof's missing reuse; the capacity phases ran
    between them."""
    code, verdict = await golive_run(
        smollm2_target, tmp_path / "b", *SHORT_LOAD, "--max-context", "1024"
    )
    assert code == Outcome.HOLD.exit_code
    fired = rules(verdict)
    assert "agent.one_arg.required" in fired["agent-protocol-failure"]
    assert "cache.prefix_reuse" in fired["critical-failure"]
    # each defect holds on its own, not only beside the other (or the run's small sizes)
    outcomes = {r["rule"]: r["outcome"] for r in verdict["rules_fired"]}
    assert outcomes["agent-protocol-failure"] == outcomes["critical-failure"] == "hold", outcomes
    assert any(c.startswith("capacity.") for c in _checks(verdict))
