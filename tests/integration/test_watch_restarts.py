"""Issue 29 §8: the watch reads engine restarts and request error codes from the server's own
metrics, not only from log text. The engine restarting on demand, and answering HTTP 500 on
demand, is what the fake is for (the real CPU engine's restart is in the closing note: a
stop and start of the same server, seen as `engine-restart`). The fake serves as the demo's
accepted deployment (name, model behind it, vLLM version), so the watch accepts it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from golive.cli.main import main
from golive.results import EXIT_USAGE
from tests.helpers.fakes.vllm import fake_vllm, restart
from tests.helpers.watching import (
    accepted_bundle,
    as_accepted,
    golive_watch,
    quick_watch,
    rules,
    watching,
)


async def test_an_engine_restart_is_seen_in_its_metrics(tmp_path: Path) -> None:
    """The engine dies and a new process serves 1.5 s later: /health fails (the health
    rollback) and the new process's start time names the restart (an alert: no OOM line
    explains it); the summary counts one restart."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    async with fake_vllm(state) as url:
        watch = quick_watch(url, accepted, tmp_path / "w", 7)
        await watching(tmp_path / "w")  # it has seen the engine before the fault
        restart(state, down_s=1.5)
        code, summary = await watch
    assert code == 1
    assert "engine-restart" in rules(summary)
    fired = next(t for t in summary["triggers"] if t["rule"] == "engine-restart")
    assert fired["rollback"] is False
    assert "process start time moved" in fired["reason"]
    assert summary["engine_restarts"] == 1
    assert "oom" not in rules(summary)
    assert summary["tool_probes"] == 0  # --tool-every 1000: the tool path was not watched
    # without --log the launch was never compared, and watch.json says so
    assert (
        "launch was compared with the accepted one only by what /metrics states of its cache "
        "settings (no --log)" in (summary["launch_not_compared"])
    )


async def test_a_restart_with_an_oom_line_is_the_oom_rollback(tmp_path: Path) -> None:
    """The same restart with the engine's OOM line in the followed log: the OOM rollback
    trigger, naming the restart."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    log = tmp_path / "engine.log"
    log.write_text("INFO serving\n")
    state = as_accepted()
    async with fake_vllm(state) as url:
        watch = quick_watch(url, accepted, tmp_path / "w", 7, "--log", str(log))
        await watching(tmp_path / "w")  # it has seen the engine before the fault
        with log.open("a") as out:
            out.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        restart(state, down_s=1.0)
        code, summary = await watch
    assert code == 1
    oom = next(t for t in summary["triggers"] if t["rule"] == "oom")
    assert oom["rollback"] is True
    assert summary["engine_restarts"] == 1
    # a log with no launch line in it compares no launch either: said, not passed over
    assert "engine.log holds no launch" in summary["launch_not_compared"]


async def test_server_errors_come_from_its_http_status_counts(tmp_path: Path) -> None:
    """Every chat answered HTTP 500 while /health says 200: the server's own status counts
    show 5xx answers (the alert), beside the synthetic completion's health rollback; before
    the fault every answer was 2xx."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    async with fake_vllm(state) as url:
        watch = quick_watch(url, accepted, tmp_path / "w", 6)
        await watching(tmp_path / "w", 3)
        state.fault = "http_500"
        code, summary = await watch
    assert code == 1
    assert "http-errors" in rules(summary)
    assert summary["http_status"]["5xx"] >= 3
    assert summary["http_status"]["2xx"] >= 1
    assert summary["engine_restarts"] == 0


async def test_a_watch_under_another_profile_than_the_accepted_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's bundle was judged under the generic profile; a watch under kimi-k3 would
    probe another critical workflow: refused before the first interval, naming the flag."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    argv = ["watch", "--accepted", str(accepted), "--out", str(tmp_path / "w")]
    async with fake_vllm(as_accepted()) as url:
        code = await asyncio.to_thread(main, [*argv, "--target", url, "--profile", "kimi-k3"])
    assert code == EXIT_USAGE
    assert "was judged under the generic profile" in capsys.readouterr().err
    assert not (tmp_path / "w/watch/observations.jsonl").exists()


async def test_a_cache_that_stops_hitting_fires_cache_regression(tmp_path: Path) -> None:
    """The accepted deployment, same launch (its cache settings as /metrics states them),
    whose prefix cache now hits nothing (evicted under other load, which the real engine
    cannot be made to do on demand): every cache probe reuses 0 of its prompt, against the
    accepted 80%: the cache-regression trigger fires."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    async with fake_vllm(state) as url:
        argv = ["--duration", "6", "--interval", "1", "--tool-every", "1000"]
        code, summary = await golive_watch(
            url, accepted, tmp_path / "w", *argv, "--cache-every", "1"
        )
    assert code == 1
    assert "cache-regression" in rules(summary)
    record = next(t for t in summary["triggers"] if t["rule"] == "cache-regression")
    assert record["evidence"]["ratios"][:2] == [0.0, 0.0]
