"""The real local vLLM (CPU) target: one server for the whole session, started once and
stopped by PID; tests that need other server flags start their own in their module. A
programme run that several tests judge is run once (`keyed_run`)."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from tests.conftest import later_users
from tests.helpers.scenario import SMALL_RUN, KeyedRun

# the session servers a `stops_the_target` test stopped: not signalled again (their PID may
# belong to another process by the end of the session)
_STOPPED: set[int] = set()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def real_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    """The bundled Qwen model on vLLM (CPU), 127.0.0.1, prefix caching and hermes tools on.
    A test marked `stops_the_target` stops it (`stop_real_target`); it runs last."""
    paths = await ensure_target("qwen")
    run_dir: Path = tmp_path_factory.mktemp("vllm-run")
    target = await start_target(paths, ServeOptions(), run_dir)
    try:
        yield target
    finally:
        if target.pid not in _STOPPED:
            await stop_target(target)


@pytest.fixture
def stop_real_target(
    request: pytest.FixtureRequest, real_target: RunningTarget
) -> Callable[[], Awaitable[None]]:
    """Stops the session's server, for the test marked `stops_the_target` (one server start
    fewer than a server of its own). Refused where a test after it still needs the server:
    that order would leave every later test a dead server."""
    assert request.node.get_closest_marker("stops_the_target") is not None, (
        f"{request.node.nodeid} stops the session's server: mark it stops_the_target"
    )
    later = [i.nodeid for i in later_users(request, "real_target")]
    assert not later, f"the session's server is still needed after this test by {later[:3]}"

    async def stop() -> None:
        await stop_target(real_target)
        _STOPPED.add(real_target.pid)  # stopped whole: the finalizer leaves its PID alone

    return stop


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
