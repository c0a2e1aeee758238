"""`golive watch` against the real CPU vLLM: clean under normal traffic, the queue trigger
under a burst beyond the accepted concurrency, the rollback command it runs, and the health
trigger when the engine stops (the last test of the group: it stops the session's server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from golive.bundle.store import verify
from golive.target.server import RunningTarget
from tests.helpers.watching import accepted_here, golive_watch, registry_with_previous, rules


async def _traffic(url: str, model: str, concurrency: int, seconds: float, tokens: int) -> int:
    """Background chat traffic for `seconds`; returns how many requests completed."""
    done = 0
    stop = asyncio.get_running_loop().time() + seconds
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count slowly from one to fifty."}],
        "max_tokens": tokens,
        "temperature": 0,
    }
    # a new connection per request, as the watch's own probes make: the CPU server closes an
    # idle keep-alive connection after 5 s, and a pooled one reused at that moment fails
    # writing its body ("Can not write request body", seen on CI)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:

        async def worker() -> None:
            nonlocal done
            while asyncio.get_running_loop().time() < stop:
                async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                    await response.read()
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def test_watch_is_clean_under_normal_traffic(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """The watch stays clean while normal traffic inside the accepted envelope runs."""
    accepted = await accepted_here(tmp_path / "accepted", f"{real_target.url}/metrics")
    watch = golive_watch(
        real_target.url,
        accepted,
        tmp_path / "w",
        # 20 intervals, each asking for a tool probe (one at a time): the clean watch is
        # asserted, not its length, but a probe must answer inside it (on a 2-core AMD box
        # in float32, beside the traffic and the cache probes, the first took 25.3 s)
        "--duration",
        "40",
        "--interval",
        "2",
        "--probe-deadline",
        "60",
        "--tool-every",
        "1",
        "--cache-every",
        "2",
    )
    traffic = _traffic(real_target.url, real_target.served_name, 1, 37, 8)
    (code, summary), served = await asyncio.gather(watch, traffic)
    assert code == 0, summary["triggers"]
    assert summary["clean"]
    assert summary["triggers"] == []
    assert served >= 1
    lines = (tmp_path / "w/watch/observations.jsonl").read_text().splitlines()
    assert len(lines) >= 3
    assert '"tool_probe_ok": true' in "".join(lines)
    assert summary["thresholds"]["max_concurrency"] == 4
    assert verify(tmp_path / "w").ok


async def test_burst_beyond_accepted_concurrency_fires_the_queue_trigger(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """A burst beyond the accepted concurrency fires the queue trigger and runs --on-rollback with
    the previous artifact's facts."""
    accepted = await accepted_here(tmp_path / "accepted", f"{real_target.url}/metrics")
    registry = await registry_with_previous(tmp_path)
    seen = tmp_path / "rollback.env"
    command = f"env | grep ^GOLIVE_ | sort >> {seen}"
    watch = golive_watch(
        real_target.url,
        accepted,
        tmp_path / "w",
        "--duration",
        "16",
        "--interval",
        "1.5",
        "--repeated",
        "2",
        "--tool-every",
        "1000",
        "--cache-every",
        "1000",
        "--registry",
        str(registry),
        "--on-rollback",
        command,
    )
    burst = _traffic(real_target.url, real_target.served_name, 10, 12, 24)
    (code, summary), _ = await asyncio.gather(watch, burst)
    assert code == 1
    assert rules(summary) == ["queue-envelope"]  # once: de-duplicated within its cool-down
    record = summary["triggers"][0]
    assert "outside the accepted queue envelope" in record["reason"]
    assert record["rollback_target"]["image_digest"] == "sha256:" + "ab" * 32
    assert record["command"]["ran"]
    assert record["command"]["exit_code"] == 0
    env = seen.read_text()
    assert env.count("GOLIVE_TRIGGER=queue-envelope") == 1  # ran once
    assert "GOLIVE_ROLLBACK_LAUNCH=vllm serve qwen --enable-prefix-caching" in env
    assert "never-copied" not in env


@pytest.mark.stops_the_target  # it stops the session's server: last of the one-worker group
async def test_watch_fires_the_health_trigger_within_two_intervals_of_a_stop(
    real_target: RunningTarget, stop_real_target: Callable[[], Awaitable[None]], tmp_path: Path
) -> None:
    """The accepted deployment's engine (the demo's Qwen: the session's server) is watched and
    stopped mid-watch: the engine-health trigger fires on the second unhealthy interval."""
    accepted = await accepted_here(tmp_path / "accepted", f"{real_target.url}/metrics")
    interval = 2.0
    try:
        watch = asyncio.ensure_future(
            golive_watch(
                real_target.url,
                accepted,
                tmp_path / "w",
                "--duration",
                "20",
                "--interval",
                str(interval),
                "--tool-every",
                "1000",
                "--cache-every",
                "1000",
                "--probe-deadline",
                "10",
            )
        )
        await asyncio.sleep(3 * interval)
    finally:
        await stop_real_target()
    code, summary = await watch
    assert code == 1
    # the first rollback is engine health; a stopping vLLM may drop /metrics an interval or
    # two before /health (CI saw /health answer at 6 and 8 s with /metrics gone), so the
    # metrics-silent alert (never a rollback) may come first
    rollbacks = [t for t in summary["triggers"] if t["rollback"]]
    assert rollbacks[0]["rule"] == "engine-health", summary["triggers"]
    lines = [
        json.loads(x) for x in (tmp_path / "w/watch/observations.jsonl").read_text().splitlines()
    ]
    first_bad = next(i for i, o in enumerate(lines) if not o["healthy"])
    fired = rollbacks[0]["interval"]
    assert first_bad >= 2  # healthy while it ran
    assert fired - first_bad == 1  # the second unhealthy interval fires it
