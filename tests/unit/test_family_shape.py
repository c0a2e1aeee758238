"""One shape for every check family (issue 32 §1): each `checks/<family>/` package exports
`Plan`, `collect(ctx, plan)`, `judge(evidence, saved)` and `JUDGES`, its own rows of the owner
table; the table is those rows and the single-module checks' rows, each once, and no check id
is owned by two rows."""

from __future__ import annotations

import dataclasses
import inspect
from itertools import combinations
from pathlib import Path
from types import ModuleType

import pytest

from golive.bundle.layout import EFFECTIVE_CONFIG
from golive.bundle.store import BundleReader
from golive.checks import agent, cache, capacity, env, smoke
from golive.checks.family import EvidenceJudge, Saved
from golive.checks.owners import EVIDENCE_JUDGES, SINGLE_MODULE_JUDGES
from golive.config_sources import load_config
from golive.profiles import load_profile
from golive.verdict.document import VerdictDocument

FAMILIES = (agent, cache, capacity, env, smoke)
PACKAGES = sorted(
    p.name for p in (Path(agent.__file__).parents[1]).iterdir() if (p / "__init__.py").is_file()
)
GOLDEN = Path(__file__).parents[1] / "data/golden-demo"


def test_every_family_package_is_listed() -> None:
    """Each package under checks/ is a family this test holds to the shape (a new one joins
    FAMILIES, so it is checked too)."""
    assert sorted(f.__name__.rsplit(".", 1)[1] for f in FAMILIES) == PACKAGES


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_family_exports_the_shape(family: ModuleType) -> None:
    """Plan is a type; collect a coroutine function of (ctx, plan); judge a function of
    (evidence, saved); JUDGES a non-empty tuple of owner-table rows."""
    assert set(family.__all__) >= {"Plan", "collect", "judge", "JUDGES"}
    assert isinstance(family.Plan, type)
    assert inspect.iscoroutinefunction(family.collect)
    assert list(inspect.signature(family.collect).parameters) == ["ctx", "plan"]
    assert callable(family.judge)
    assert not inspect.iscoroutinefunction(family.judge)
    assert list(inspect.signature(family.judge).parameters) == ["evidence", "saved"]
    assert family.JUDGES
    assert isinstance(family.JUDGES, tuple)
    assert all(isinstance(row, EvidenceJudge) for row in family.JUDGES)


def test_smokes_plan_is_empty_and_frozen() -> None:
    """Smoke takes nothing but the context: its Plan is a frozen dataclass with no fields."""
    assert dataclasses.fields(smoke.Plan) == ()
    assert smoke.Plan.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert smoke.Plan() == smoke.Plan()


def test_every_row_comes_from_exactly_one_family() -> None:
    """The owner table is the families' rows and the single-module checks' rows, each once,
    and nothing else."""
    declared = [row for f in FAMILIES for row in f.JUDGES] + list(SINGLE_MODULE_JUDGES)
    assert len({id(row) for row in declared}) == len(declared)
    assert sorted(map(id, EVIDENCE_JUDGES)) == sorted(map(id, declared))
    assert len({row.name for row in EVIDENCE_JUDGES}) == len(EVIDENCE_JUDGES)


def test_the_table_keeps_its_order() -> None:
    """verdict.json's `judged_from_evidence` lists judges in the table's order: it is the one
    bundles were sealed with."""
    assert [row.name for row in EVIDENCE_JUDGES] == [
        "agent",
        "cache",
        "environment.chain",
        "environment.k8s",
        "environment.ray",
        "capacity.model_load",
        "capacity.long_input",
        "capacity.concurrency",
        "capacity.slo",
        "capacity.sustained",
        "capacity.memory",
        "capacity.gpu_memory",
        "capacity.answers_under_load",
        "smoke",
        "smoke.classes",
        "smoke.concurrent_sessions",
        "smoke.sustained",
        "golive.ledger",
        "golive.client_headroom",
        "target.identity",
    ]


def _overlap(a: str, b: str) -> bool:
    """Two owned ids or prefixes ('x.' owns every id under x) that name a common check."""
    return a == b or (a.endswith(".") and b.startswith(a)) or (b.endswith(".") and a.startswith(b))


def test_no_check_id_is_owned_twice() -> None:
    """No id or prefix of one row names a check another row owns: `owner_of` takes the first
    match, so an overlap would hide the second judge."""
    clashes = [
        (one.name, a, other.name, b)
        for one, other in combinations(EVIDENCE_JUDGES, 2)
        for a in one.checks
        for b in other.checks
        if _overlap(a, b)
    ]
    assert clashes == []


def test_overlap_sees_a_prefix() -> None:
    """The clash test's rule: a prefix owns what starts with it, an exact id only itself."""
    assert _overlap("cache.", "cache.reuse")
    assert _overlap("agent.retry", "agent.")
    assert not _overlap("smoke.health", "smoke.health_x")
    assert not _overlap("environment.node.", "environment.node_count")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_familys_judge_reads_the_recorded_demo(family: ModuleType) -> None:
    """On the demo's bundle (the real CPU vLLM), a family's judge gives every check the
    sealed verdict lists under its rows, and only checks its rows own."""
    config = load_config(GOLDEN / EFFECTIVE_CONFIG)
    results = family.judge(BundleReader(GOLDEN), Saved(load_profile(config.profile), config))
    judged = {c.id for c in results}
    sealed = {
        c.id
        for c in VerdictDocument.read(GOLDEN).checks
        if any(row.owns(c.id) for row in family.JUDGES)
    }
    assert sealed
    assert sealed <= judged
    assert all(any(row.owns(i) for row in family.JUDGES) for i in judged)
