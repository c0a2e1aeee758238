"""How the bundled local engine is sized to the host it shares with golive."""

from __future__ import annotations

import pytest

from golive.target.server import cpu_threads, engine_niceness


@pytest.mark.parametrize(
    ("cpus", "niceness"),
    [(1, 5), (2, 5), (3, 0), (16, 0)],
)
def test_the_engine_yields_to_golive_only_on_a_small_host(cpus: int, niceness: int) -> None:
    """On 2 cores or fewer the bundled engine runs below golive's priority, so golive's own
    load client is not starved into judging itself; larger hosts keep the same priority."""
    assert engine_niceness(cpus) == niceness


@pytest.mark.parametrize(
    ("cpus", "user_set", "env"),
    [
        (2, False, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}),
        (1, False, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}),
        (2, True, {}),  # the user's own value stands
        (8, False, {}),  # vLLM's own choice on a larger host
    ],
)
def test_a_small_host_computes_on_every_core(
    cpus: int, user_set: bool, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a small host the engine computes on both cores (vLLM keeps one for its API server
    otherwise); a value the user set is kept, and larger hosts keep vLLM's own choice."""
    if user_set:
        monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    else:
        monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    assert cpu_threads(cpus) == env
