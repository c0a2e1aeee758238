"""The Agent workload generator is production-shaped and reproducible."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golive.errors import ConfigError
from golive.traffic.workload import _WORDS, AgentWorkload, WorkloadShape, filler, read_sample


def _filler_as_it_was(words: int, seed: int) -> str:
    """The filler text as golive made it before it drew in bulk: one `choice` a word."""
    rng = random.Random(seed)
    out = [f"[{seed}]"]
    for i in range(words):
        out.append(rng.choice(_WORDS) + ("." if i % 13 == 12 else ""))
    return " ".join(out)


@pytest.mark.parametrize("words", [0, 1, 12, 13, 14, 26, 450, 1500, 4001])
@pytest.mark.parametrize("seed", [0, 7, 99, 4242, 31337, 10_000 + 5, 50_000 + 3, 2**31 - 1])
def test_filler_is_the_text_it_always_was(words: int, seed: int) -> None:
    """A seed's prompt text is word for word what it was before the bulk draw: a replayed or
    compared run sends the prompts it sent, and a server's prefix cache sees the same text."""
    assert filler(words, seed) == _filler_as_it_was(words, seed)


@given(st.integers(min_value=0, max_value=600), st.integers(min_value=0, max_value=2**63))
def test_filler_matches_choice_for_any_seed(words: int, seed: int) -> None:
    """Any seed and length: the same words, the same sentence ends, nothing cut or added."""
    assert filler(words, seed) == _filler_as_it_was(words, seed)


def test_same_request_number_gives_the_same_body() -> None:
    """A workload gives the same body for the same request number, and another for the next."""
    workload = AgentWorkload(WorkloadShape(seed=3), "m")
    assert workload.body(17) == workload.body(17)
    assert workload.body(17) != workload.body(18)


def test_bodies_carry_the_production_shape() -> None:
    """Shared system prompt, tool schemas, tool results in history, long and structured mixes."""
    shape = WorkloadShape(turns=2, long_share=0.2, structured_share=0.3, seed=1)
    workload = AgentWorkload(shape, "m")
    bodies = [workload.body(n) for n in range(400)]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 1  # one shared system prompt: prefix caching can work
    kinds = [workload.kind(n) for n in range(400)]
    assert 0.12 < kinds.count("long") / 400 < 0.28
    assert 0.22 < kinds.count("structured") / 400 < 0.38
    agent = next(b for b, k in zip(bodies, kinds, strict=True) if k == "agent")
    roles = [m["role"] for m in agent["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool", "user"]
    assert agent["tools"]
    assert agent["tool_choice"] == "auto"
    structured = next(b for b, k in zip(bodies, kinds, strict=True) if k == "structured")
    assert structured["response_format"]["json_schema"]["strict"] is True
    long = next(b for b, k in zip(bodies, kinds, strict=True) if k == "long")
    assert len(long["messages"][-1]["content"]) > 5 * len(agent["messages"][-1]["content"])
    call = agent["messages"][2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"])["field_0"].startswith("item-")


def test_user_sample_file(tmp_path: Path) -> None:
    """A user's sample file becomes bodies for the served model; a bad line is refused by file and
    line."""
    path = tmp_path / "s.jsonl"
    path.write_text('{"model": "x", "messages": [{"role": "user", "content": "hi"}]}\n\n')
    assert read_sample(path, "served") == [
        {"model": "served", "messages": [{"role": "user", "content": "hi"}]}
    ]
    path.write_text('{"messages": 3}\n')
    with pytest.raises(ConfigError, match=r"s\.jsonl:1"):
        read_sample(path, "served")
