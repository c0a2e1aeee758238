"""How the bundled local engine is sized to the host it shares with golive."""

from __future__ import annotations

import pytest

from golive.target.server import engine_niceness


@pytest.mark.parametrize(
    ("cpus", "niceness"),
    [(1, 5), (2, 5), (3, 0), (16, 0)],
)
def test_the_engine_yields_to_golive_only_on_a_small_host(cpus: int, niceness: int) -> None:
    """On 2 cores or fewer the bundled engine runs below golive's priority, so golive's own
    load client is not starved into judging itself; larger hosts keep the same priority."""
    assert engine_niceness(cpus) == niceness
