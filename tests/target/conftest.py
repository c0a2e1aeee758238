"""The real local vLLM (CPU) target: one server for the whole session, started once and
stopped by PID; tests that need other server flags start their own in their module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def real_target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningTarget]:
    """The bundled Qwen model on vLLM (CPU), 127.0.0.1, prefix caching and hermes tools on."""
    paths = await ensure_target("qwen")
    run_dir: Path = tmp_path_factory.mktemp("vllm-run")
    target = await start_target(paths, ServeOptions(), run_dir)
    try:
        yield target
    finally:
        await stop_target(target)
