"""`golive capacity --launch CMD`: golive starts the user's server command itself, records
the model-load phase (log + memory while loading), runs the phases and stops it. An engine
killed above a stable ramp step is started again by golive, so the sustained window still
measures the last stable step (issue 28: "death after a stable step → observe-with-limits at
that step")."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import socket
from pathlib import Path

from golive.cli.main import main
from golive.evidence.sampling import process_tree
from golive.results import Outcome
from golive.target.install import ensure_target
from golive.target.server import ServeOptions, free_port, serve_argv
from tests.helpers.scenario import NO_FLOOR_ARGS


def _server_pid(port: int) -> int | None:
    """The launched API server: the process whose command line serves on `port`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in argv and str(port).encode() in argv and b"vllm" in b" ".join(argv):
            return int(proc.name)
    return None


async def _kill_engine_at_step(out: Path, port: int, step: str) -> int:
    """SIGKILL the engine processes (the API server's children) once `step`'s window has
    started; the API server's PID."""
    marker = out / f"metrics/capacity-{step}-before.prom"
    for _ in range(3000):
        if marker.exists():
            break
        await asyncio.sleep(0.1)
    assert marker.exists(), f"the {step} window never started"
    await asyncio.sleep(1.5)
    server = _server_pid(port)
    assert server is not None, "the launched server was not found"
    engine = [pid for pid in process_tree(server) if pid != server]
    assert engine, "the engine processes were not found"
    for pid in engine:
        os.kill(pid, signal.SIGKILL)
    return server


async def test_launch_records_model_load_and_relaunches_after_a_death(tmp_path: Path) -> None:
    """capacity --launch starts the server and records its model load from the log and load
    curve. The engine is killed in the concurrency-2 window after concurrency 1 held: golive
    starts the command again, runs the sustained window at 1 on it, and the outcome is
    observe-with-limits at concurrency 1 (the death is the limit, never expand-capacity).
    Both launches are stopped afterwards."""
    paths = await ensure_target("qwen")
    port = free_port()
    command = shlex.join(
        [
            "env",
            "HF_HUB_OFFLINE=1",
            "VLLM_NO_USAGE_STATS=1",
            "VLLM_CPU_KVCACHE_SPACE=1",
            f"VLLM_CACHE_ROOT={paths.root / 'vllm-cache'}",
            *serve_argv(paths, ServeOptions(max_model_len=1024), port),
        ]
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        "capacity:\n  system_prompt_words: 30\n  tools: 1\n  turns: 1\n  long_share: 0\n"
        "  max_tokens: 4\n  long_max_tokens: 2\n"
    )
    out = tmp_path / "b"
    run = asyncio.ensure_future(
        asyncio.to_thread(
            main,
            [
                "capacity",
                "--target",
                f"http://127.0.0.1:{port}",
                "--launch",
                command,
                "--config",
                str(config),
                "--concurrency",
                "2",
                "--max-context",
                "128",
                "--step-duration",
                "5",
                "--duration",
                "10",  # the CPU engine answers one request in ~2.5-3 s: a trend needs 3 or more
                *NO_FLOOR_ARGS,
                "--out",
                str(out),
                "--json",
            ],
        )
    )
    first = await _kill_engine_at_step(out, port, "c2")
    code = await asyncio.wait_for(run, 600)
    verdict = json.loads((out / "verdict.json").read_text())
    checks = {c["id"]: c for c in verdict["checks"]}
    load = checks["capacity.model_load"]
    assert load["status"] in ("pass", "warn"), load["summary"]
    assert load["measurements"]["peak_load_rss_mib"] > 500
    assert load["measurements"]["load_curve_points"] > 5
    assert (out / "memory/load.csv").read_text().startswith("t_s,host_rss_mib")
    assert "version 0.32.0" in (out / "environment/startup.log").read_text()
    termination = json.loads((out / "memory/termination.json").read_text())
    assert (termination["phase"], termination["concurrency"]) == ("concurrency", 2)
    restart = json.loads((out / "memory/restart.json").read_text())
    assert restart["served_again"] is True, restart
    assert restart["how"] == "golive started its --launch command again"
    assert restart["pid"] != first
    phases = [p["phase"] for p in json.loads((out / "metrics/capacity-phases.json").read_text())]
    assert phases == ["model_load", "long_input", "concurrency", "restart", "sustained"]
    ramp = checks["capacity.concurrency"]
    assert ramp["measurements"]["ceiling"] == 1, ramp["summary"]
    sustained = checks["capacity.sustained"]
    assert sustained["measurements"]["concurrency"] == 1
    assert sustained["measurements"]["after_restart"] is True
    assert verdict["outcome"] == "observe-with-limits", verdict["rules_fired"]
    assert code == Outcome.OBSERVE_WITH_LIMITS.exit_code
    assert verdict["limits"]["max_concurrency"] == 1
    # Both launches are gone afterwards: nothing listens on the port.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert _server_pid(port) is None
