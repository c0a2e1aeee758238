"""`golive capacity --launch CMD`: golive starts the user's server command itself, records
the model-load phase (log + memory while loading), runs the phases and stops it."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
from pathlib import Path

from golive.cli.main import main
from golive.target.install import ensure_target
from golive.target.server import ServeOptions, free_port, serve_argv


async def test_launch_records_model_load_and_stops_the_server(tmp_path: Path) -> None:
    """capacity --launch starts the server, records its model load from the log and load curve, runs
    the phases and stops it."""
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
    code = await asyncio.to_thread(
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
            "1",
            "--max-context",
            "128",
            "--step-duration",
            "5",
            "--duration",
            "10",  # the CPU engine answers one request in ~2.5-3 s: a trend needs 3 or more
            "--out",
            str(out),
            "--json",
        ],
    )
    verdict = json.loads((out / "verdict.json").read_text())
    checks = {c["id"]: c for c in verdict["checks"]}
    load = checks["capacity.model_load"]
    assert load["status"] in ("pass", "warn"), load["summary"]
    assert load["measurements"]["peak_load_rss_mib"] > 500
    assert load["measurements"]["load_curve_points"] > 5
    assert (out / "memory/load.csv").read_text().startswith("t_s,host_rss_mib")
    assert "version 0.32.0" in (out / "environment/startup.log").read_text()
    phases = [p["phase"] for p in json.loads((out / "metrics/capacity-phases.json").read_text())]
    assert phases == ["model_load", "long_input", "concurrency", "sustained"]
    assert code == 0, [(c["id"], c["summary"]) for c in verdict["checks"]]
    # The launched server is gone afterwards: nothing listens on its port.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
