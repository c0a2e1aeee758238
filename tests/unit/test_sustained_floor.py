"""Issue 29 §3: the sustained window has a floor for a decision — `capacity.min_sustained_s`
(10 minutes) and `capacity.min_sustained_completions` (30) by default. Shorter, or fewer
answers, is `no_data` saying how long to run. On the recorded CPU demo: a window of 600 s by
its records, 1,421 answers, sealed `pass`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from golive.bundle.layout import EFFECTIVE_CONFIG
from golive.bundle.store import BundleReader
from golive.checks.capacity.judge import judge_sustained
from golive.checks.capacity.rules import Action, Classification
from golive.checks.capacity.windows import short_window
from golive.config import CapacityConfig
from golive.results import Status

GOLDEN = Path(__file__).parent.parent / "data/golden-demo"
pytestmark = pytest.mark.tampers_bundle  # copies of the demo with a floor in their config


def _bundle(tmp_path: Path, **floor: float) -> BundleReader:
    """The demo's bundle, its effective config naming the floor (as a new run's does)."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    path = root / EFFECTIVE_CONFIG
    config = yaml.safe_load(path.read_text())
    config["capacity"].update(floor)
    path.write_text(yaml.safe_dump(config))
    return BundleReader(root)


def test_a_higher_floor_makes_the_600_s_window_no_data(tmp_path: Path) -> None:
    """A floor of 900 s and 2,000 answers: 600 s and 1,421 answers are both short, each
    named, with what to run; what the window saw is kept."""
    floor = {"min_sustained_s": 900.0, "min_sustained_completions": 2000}
    result = judge_sustained(_bundle(tmp_path, **floor), CapacityConfig(**floor))
    assert result.status is Status.NO_DATA
    assert result.critical
    assert "ran 600 s, shorter than the 900 s" in result.summary
    assert "--duration 900" in result.summary
    assert "had 1421 answers, fewer than the 2000" in result.summary
    assert "over this window: steady at concurrency 4" in result.summary  # what it saw is kept
    assert result.measurements["completed"] == 1421


@pytest.mark.parametrize(
    ("floor", "status", "named"),
    [
        ({"min_sustained_s": 600.0, "min_sustained_completions": 30}, Status.PASS, None),
        (
            {"min_sustained_s": 600.0, "min_sustained_completions": 1500},
            Status.NO_DATA,
            "1421 answers",
        ),
        ({"min_sustained_s": 700.0, "min_sustained_completions": 30}, Status.NO_DATA, "ran 600 s"),
    ],
    ids=["inside", "too-few-answers", "too-short"],
)
def test_a_configured_floor(
    tmp_path: Path, floor: dict[str, float], status: Status, named: str | None
) -> None:
    """The floor comes from the config the run applied."""
    config = CapacityConfig(**floor)
    result = judge_sustained(_bundle(tmp_path, **floor), config)
    assert result.status is status, result.summary
    if named is not None:
        assert named in result.summary


def test_a_new_run_defaults_to_ten_minutes() -> None:
    """A default run holds its window for the floor it is judged on."""
    config = CapacityConfig()
    assert config.duration_s >= config.min_sustained_s == 600
    assert config.min_sustained_completions == 30


@pytest.mark.parametrize(
    "found",
    [
        Classification(Action.LIMIT_TRAFFIC, "the engine terminated at concurrency 8", ceiling=4),
        Classification(Action.LIMIT_TRAFFIC, "latency rose 40% over the run", ceiling=2),
        Classification(Action.EXPAND_CAPACITY, "OOM under sustained load"),
    ],
    ids=["death", "drift", "expand"],
)
def test_what_a_short_window_found_stands(found: Classification) -> None:
    """A window cut short because the engine died, or one that drifted, keeps its finding and
    its limit: the floor only stops a short window from passing."""
    assert short_window(found, 120.0, 12, CapacityConfig()) == found


def test_a_window_its_cap_ended_after_nine_tenths_is_not_short() -> None:
    """The share of its length a window must cover (90%) is not short of the floor: 545 s of
    600 s passes, 535 s is short."""
    stable = Classification(Action.STABLE, "steady")
    assert short_window(stable, 545.0, 300, CapacityConfig()) == stable
    assert short_window(stable, 535.0, 300, CapacityConfig()).action is Action.NO_DATA
