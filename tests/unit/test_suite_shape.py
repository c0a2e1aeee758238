"""The suite's own shape (issue 18): every test says what it proves, and the real-engine
tests live under tests/target."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import in_serial_group, uses_fixture

TESTS = Path(__file__).parents[1]


def _tests() -> list[tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "test"
            ):
                found.append((path, node))
    return found


def test_every_test_has_a_docstring_saying_what_it_proves() -> None:
    """A test function without a docstring is named here with its file."""
    tests = _tests()
    assert len(tests) > 300
    bare = [f"{p.relative_to(TESTS)}::{n.name}" for p, n in tests if not ast.get_docstring(n)]
    assert bare == []


def test_only_tests_under_target_start_a_real_engine() -> None:
    """A test outside tests/target that asks for a real-engine fixture is named here."""
    engine = ("real_target", "smollm2_target", "tight_target")
    outside = [
        f"{p.relative_to(TESTS)}::{n.name}"
        for p, n in _tests()
        if "target" not in p.relative_to(TESTS).parts[:1]
        and any(a.arg in engine for a in n.args.args)
    ]
    assert outside == []


def test_make_test_keeps_the_real_engine_tier_on_one_worker(request: pytest.FixtureRequest) -> None:
    """`make test` runs the tiers in parallel with --dist loadgroup, whose scheduler
    (tests/conftest.py) keeps the one-worker group (the real vLLM tier, the Ray cluster tests)
    on one worker: otherwise each worker would start its own vLLM, or its own Ray cluster."""
    makefile = (TESTS.parent / "Makefile").read_text()
    beside, after = [
        line for line in makefile.splitlines() if line.startswith("\t$(BIN)/pytest -q -n")
    ]
    assert "--dist loadgroup" in beside
    assert '-m "not client_timed"' in beside
    assert "-m client_timed" in after
    assert in_serial_group("tests/target/test_demo.py::test_demo_runs")
    assert in_serial_group("tests/integration/test_ray.py::test_a[1-3]")
    assert not in_serial_group("tests/unit/test_layers.py::test_target_like_name")
    assert not in_serial_group("tests/integration/test_target_faults.py::test_x")
    target = [i for i in request.session.items if i.get_closest_marker("target") is not None]
    assert all(in_serial_group(i.nodeid) for i in target)
    timed = [i for i in request.session.items if i.get_closest_marker("client_timed") is not None]
    assert not any(in_serial_group(i.nodeid) for i in timed)
    assert all(i.nodeid.startswith("tests/integration/") for i in timed)


def test_a_test_that_stops_the_session_server_runs_last_of_its_group(
    request: pytest.FixtureRequest,
) -> None:
    """The test that stops the session's vLLM (saving a server start) comes after every other
    test of the one-worker group, whatever file it is in: a test after it would find no
    server. Only target tests may stop it."""
    items = request.session.items
    group = [i for i in items if in_serial_group(i.nodeid)]
    stops = [i for i in group if i.get_closest_marker("stops_the_target") is not None]
    assert all(i.get_closest_marker("target") is not None for i in stops)
    if stops:
        assert group[-len(stops) :] == stops
        assert items[: len(group)] == group  # the group first, as one unit


def test_the_shared_ray_cluster_is_used_only_at_the_head_of_the_group(
    request: pytest.FixtureRequest,
) -> None:
    """The tests on the shared Ray cluster (`ray_cluster`, stopped after its last user) are in
    the one-worker group and run first of it, one after another: a user elsewhere, or one
    later in the group, would keep the cluster's processes running beside the engine's
    tests."""
    items = request.session.items
    group = [i for i in items if in_serial_group(i.nodeid)]
    users = [i for i in items if uses_fixture(i, "ray_cluster")]
    assert all(in_serial_group(i.nodeid) for i in users), [i.nodeid for i in users]
    assert group[: len(users)] == users
