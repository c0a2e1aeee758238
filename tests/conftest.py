"""Shared fixtures. The real local vLLM target starts once per session and stops by PID."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from golive.bundle.store import MANIFEST
from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target, stop_target
from golive.verdict.rederive import rederive


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


@pytest.fixture(autouse=True)
def _private_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Signing in tests never writes into the user's rollback registry."""
    monkeypatch.setenv("GOLIVE_REGISTRY", str(tmp_path / "golive-registry"))


CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL_PASSED] = report.passed
    return report


@pytest.fixture(autouse=True)
def _every_bundle_rederives(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Every sealed bundle a passing test leaves re-derives offline (`golive decide`): the
    families judged from the bundle give the sealed checks again, and the same outcome.
    Tests that alter a bundle on purpose are marked `tampers_bundle`."""
    yield
    if request.node.get_closest_marker("tampers_bundle") is not None:
        return
    if not request.node.stash.get(CALL_PASSED, False):
        return
    for manifest in sorted(tmp_path.rglob(MANIFEST)):
        if not (manifest.parent / "verdict.json").is_file():
            continue
        again = rederive(manifest.parent)
        assert again.agrees, f"{manifest.parent}: {list(again.problems)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes a real-engine fixture is a `target` test, marked or not, so
    `make unit` (-m "not target") never starts vLLM."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if any(n == "real_target" or n.endswith("_target") for n in names):
            item.add_marker(pytest.mark.target)
