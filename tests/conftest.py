"""Fixtures every test shares: a private rollback registry, and every sealed bundle a passing
test leaves re-derives. The real local vLLM target is in tests/target/conftest.py."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from golive.bundle.layout import MANIFEST
from golive.orchestration.rederive import Rederived, rederive
from golive.results import Outcome

if TYPE_CHECKING:  # the Ray helper imports ray (golive[ray]): only where a test asks for it
    from tests.helpers.ray_cluster import LoopbackCluster


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


def never_better(again: Rederived) -> bool:
    """A bundle whose checks lack their evidence re-derives to no outcome that accepts more
    than the sealed one: not accepted at all (hold or worse), or the same or worse."""
    derived = again.decision.outcome
    return derived.severity >= min(again.sealed.severity, Outcome.HOLD.severity)


@pytest.fixture(autouse=True)
def _every_bundle_rederives(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Every sealed bundle a passing test leaves re-derives offline (`golive decide`): the
    families judged from the bundle give the sealed checks again, and the same outcome.
    Tests that alter a bundle on purpose are marked `tampers_bundle`; tests that seal checks
    without their evidence (`synthetic_checks`) must re-derive to the same or a worse outcome,
    never a better one."""
    yield
    if request.node.get_closest_marker("tampers_bundle") is not None:
        return
    if not request.node.stash.get(CALL_PASSED, False):
        return
    synthetic = request.node.get_closest_marker("synthetic_checks") is not None
    for manifest in sorted(tmp_path.rglob(MANIFEST)):
        if not (manifest.parent / "verdict.json").is_file():
            continue
        again = rederive(manifest.parent)
        if synthetic:
            assert never_better(again), f"{manifest.parent}: {list(again.problems)[:8]}"
            continue
        assert again.agrees, f"{manifest.parent}: {list(again.problems)}"


TARGET_TESTS = Path(__file__).parent / "target"
PACKAGE_TESTS = Path(__file__).parent / "package"
INTEGRATION_TESTS = Path(__file__).parent / "integration"
# Under `pytest -n N --dist loadgroup` (make test), the real vLLM tier runs on one worker, in
# order, on its one session-scoped server, while the other workers take the rest; the local
# Ray cluster's tests join it, so two Ray clusters never start on one host at once. The group
# is chosen by the scheduler below from each test's node id: pytest 9.2 no longer lets
# xdist's own `xdist_group` mark rename a node id, so that mark groups nothing.
SERIAL_GROUP = "one-worker"
# test_knee_repeats asserts a 100 ms event-loop lag limit: beside the engine on a niced worker
# its client starved (lag p99 0.46 s), so it runs on the unniced worker, between engine tests
ONE_WORKER = ("test_ray.py", "test_knee_repeats.py")
# The integration tier drives golive's own load client against fakes and judges its timing
# (event-loop lag, sends per window): beside the busy engine on a niced worker three of them
# starved (lag p99 0.99 s; a window with 2 of its 9 samples), so `make test` runs them in a
# second pass, after the engine's group, as `-m client_timed`.
CLIENT_TIMED = "client_timed"


def in_serial_group(nodeid: str) -> bool:
    """A test of the one-worker group: the target tier, or a file named in ONE_WORKER."""
    path = nodeid.split("::", 1)[0]
    return path.startswith("tests/target/") or path.rsplit("/", 1)[-1] in ONE_WORKER


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadgroup with one group: the one-worker tests are one unit of work (the largest,
    so the first a worker takes), every other test a unit of its own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class OneWorkerGroup(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            return SERIAL_GROUP if in_serial_group(nodeid) else nodeid

    return OneWorkerGroup(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/target (the real local vLLM) is a `target` test, so `make unit`
    (-m "not target") never starts vLLM; no test elsewhere may be marked `target`. Every test
    under tests/package (the built wheel in a fresh venv) is a `package` test; every test under
    tests/integration outside the one-worker group is `client_timed`. The one-worker group's
    tests are put first, and of them a test marked `stops_the_target` last, in
    pytest_collection_finish (`running_order`)."""
    for item in items:
        if item.path.is_relative_to(PACKAGE_TESTS):
            item.add_marker(pytest.mark.package)
        if item.path.is_relative_to(INTEGRATION_TESTS) and not in_serial_group(item.nodeid):
            item.add_marker(CLIENT_TIMED)
        if item.path.is_relative_to(TARGET_TESTS):
            item.add_marker(pytest.mark.target)
        elif item.get_closest_marker("target") is not None:
            raise pytest.UsageError(
                f"{item.nodeid} is marked target but is not under tests/target: move it there"
            )


def running_order(item: pytest.Item) -> tuple[bool, bool, bool]:
    """The one-worker group first; of it, the tests on the shared Ray cluster first, one after
    another (the cluster stops after the last of them, so its processes never run beside the
    rest of the group), and a test that stops the session's vLLM (one server start fewer)
    last."""
    return (
        not in_serial_group(item.nodeid),
        not uses_fixture(item, "ray_cluster"),
        item.get_closest_marker("stops_the_target") is not None,
    )


def uses_fixture(item: pytest.Item, name: str) -> bool:
    return name in getattr(item, "fixturenames", ())


def later_users(request: pytest.FixtureRequest, name: str) -> list[pytest.Item]:
    """The tests after the requesting one, in the running order, that use fixture `name`:
    who still needs a shared server or cluster that this test would stop."""
    items = request.session.items
    return [i for i in items[items.index(request.node) + 1 :] if uses_fixture(i, name)]


# the one loopback Ray cluster the tests share while it runs: (its generator, the cluster)
_RAY_CLUSTER: list[tuple[Generator[LoopbackCluster], LoopbackCluster]] = []
# why it could not start, kept: the next test that asks fails at once, not after another try
_RAY_CLUSTER_FAILED: list[BaseException] = []


@pytest.fixture(scope="session")
def _ray_cluster_stops() -> Iterator[None]:
    """Stops the shared Ray cluster at the session's end if a test left it running (a run
    interrupted, or -x, before its last user)."""
    yield
    while _RAY_CLUSTER:
        _RAY_CLUSTER.pop()[0].close()


@pytest.fixture
def ray_cluster(
    request: pytest.FixtureRequest, _ray_cluster_stops: None
) -> Iterator[LoopbackCluster]:
    """A head and two workers on loopback (tests/helpers/ray_cluster.py), started by the first
    test that asks for it and stopped after the last one in the running order: one start
    (~15 s on 2 cores) for test_ray.py and test_ray_load.py, and no Ray processes beside the
    rest of the one-worker group (`running_order` puts its users together, first)."""
    if _RAY_CLUSTER_FAILED:
        raise _RAY_CLUSTER_FAILED[0]
    if not _RAY_CLUSTER:
        from tests.helpers.ray_cluster import three_node_cluster

        started = three_node_cluster()
        try:
            _RAY_CLUSTER.append((started, next(started)))
        except BaseException as exc:
            _RAY_CLUSTER_FAILED.append(exc)
            raise
    yield _RAY_CLUSTER[0][1]
    if not later_users(request, "ray_cluster"):
        _RAY_CLUSTER.pop()[0].close()  # its finally shuts the cluster down


# a file: every test phase's seconds, appended (absolute: some tests change directory)
TIMES = (
    os.path.abspath(os.environ["GOLIVE_TEST_TIMES"]) if "GOLIVE_TEST_TIMES" in os.environ else None
)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With GOLIVE_TEST_TIMES set, each test's setup, call and teardown seconds are appended
    to that file (tab-separated: node id, phase, seconds, outcome): the whole list that
    `--durations` cuts to ten, for finding where the suite's time goes (docs/development.md)."""
    if TIMES and "PYTEST_XDIST_WORKER" not in os.environ:  # under xdist: the controller's
        with open(TIMES, "a", encoding="utf-8") as sink:
            sink.write(f"{report.nodeid}\t{report.when}\t{report.duration:.2f}\t{report.outcome}\n")


NICE = 15  # at 10 the engine answered too few for the SLO test's bounds (55 of 59 at c1)
_beside_group: list[bool] = []
_niced: list[bool] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """The running order (`running_order`: the one-worker group, the longest pole, first, so
    a worker starts it at once), set here, after every reordering plugin (--ff and --nf
    reorder after pytest_collection_modifyitems) and before xdist's worker reports its
    collection: a test that stops the session's vLLM must stay last. And whether this run
    holds the one-worker group at all (after -m deselects): a pass without it (make test's
    second, -m client_timed) has no engine to yield to."""
    session.items.sort(key=running_order)
    _beside_group.append(any(in_serial_group(item.nodeid) for item in session.items))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under xdist, in a run that holds the one-worker group, a worker lowers its own priority
    (once) before its first test outside that group: the real vLLM tier's timings then see
    nearly the CPU they would alone, and the other tiers use what it leaves."""
    if _niced or "PYTEST_XDIST_WORKER" not in os.environ or not any(_beside_group):
        return
    if not in_serial_group(item.nodeid):
        os.nice(NICE)
        _niced.append(True)
