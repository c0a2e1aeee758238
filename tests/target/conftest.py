"""The real local vLLM (CPU) target: one server for the whole session, started once and
stopped by PID; tests that need other server flags start their own in their module. A
programme run that several tests judge is run once (`keyed_run`)."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from tests.helpers.scenario import SMALL_RUN, KeyedRun


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def real_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    """The bundled Qwen model on vLLM (CPU), 127.0.0.1, prefix caching and hermes tools on.
    A test marked `stops_the_target` stops it; the one-worker group runs that test last."""
    paths = await ensure_target("qwen")
    run_dir: Path = tmp_path_factory.mktemp("vllm-run")
    target = await start_target(paths, ServeOptions(), run_dir)
    try:
        yield target
    finally:
        await stop_target(target)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def keyed_run(
    real_target: RunningTarget, tmp_path_factory: pytest.TempPathFactory
) -> KeyedRun:
    """The run the key-leak search and the run-versus-sections comparison both judge: one
    programme on the 2-core target is ~3.5 min of the suite, so it is run once."""
    root = tmp_path_factory.mktemp("keyed-run")
    canary = f"sk-golive-canary-{secrets.token_hex(16)}"
    env = {**os.environ, "GOLIVE_CANARY_KEY": canary}
    config = root / "run.yaml"
    config.write_text(SMALL_RUN)
    out, log, junit = root / "bundle", root / "golive.log", root / "junit.xml"
    with log.open("wb") as sink:
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "golive", "run", "--target", real_target.url,
            "--api-key-env", "GOLIVE_CANARY_KEY", "--log", str(real_target.log_path),
            "--config", str(config), "--out", str(out), "--prefix-tokens", "320",
            "--warm-repeats", "2", "--cold-samples", "1", "--junit", str(junit), "--json",
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
        code = await asyncio.wait_for(run.wait(), 900)
    return KeyedRun(out, code, canary, env, log, junit)
