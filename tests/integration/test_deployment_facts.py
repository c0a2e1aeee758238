"""The served model is asked of /v1/models once per run and every family reuses it; an
answer that named no model is asked again by the next family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.checks.context import CheckContext, ServedModel, served_model
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.results import CheckClass, CheckResult, Status
from tests.helpers.fakes.vllm import MODEL, FakeState, fake_vllm


async def _ask_twice(url: str, out: Path) -> tuple[ServedModel | None, ServedModel | None]:
    seen: list[ServedModel | None] = []

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        seen.append(await served_model(ctx, "first-family"))
        seen.append(await served_model(ctx, "second-family"))
        return [CheckResult("smoke.health", CheckClass.SMOKE, True, Status.PASS, "asked")]

    await judge(load_config(None, {"target.url": url}), out, "smoke", programme, ("smoke",))
    return seen[0], seen[1]


def _labels(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return [json.loads(line)["label"] for line in path.read_text().splitlines()]


# its bundle holds hand-made smoke results: what is tested is how often /v1/models is asked
@pytest.mark.synthetic_checks
async def test_the_second_family_reuses_the_first_answer(tmp_path: Path) -> None:
    """One GET /v1/models when the run starts (with /version: the deployment's identity),
    after the preflight's; both families are told the model and where it was read."""
    state = FakeState()
    async with fake_vllm(state) as url:
        first, second = await _ask_twice(url, tmp_path / "b")
    assert state.models_asked == 2  # the preflight's (no bundle record), the identity's
    assert first == second == ServedModel(MODEL, 4096, "requests/identity.jsonl")
    assert _labels(tmp_path / "b/requests/identity.jsonl") == ["version", "models"]
    assert _labels(tmp_path / "b/requests/first-family.jsonl") == []
    assert _labels(tmp_path / "b/requests/second-family.jsonl") == []


@pytest.mark.synthetic_checks
async def test_a_failed_answer_is_asked_again(tmp_path: Path) -> None:
    """A 503 at the start names no model: the first family asks again and saves that answer
    as its own; the second reuses it."""
    state = FakeState(fault="models_down_once", models_down_at=2)  # after the preflight's
    async with fake_vllm(state) as url:
        first, second = await _ask_twice(url, tmp_path / "b")
    assert state.models_asked == 3
    assert first == second == ServedModel(MODEL, 4096, "requests/first-family.jsonl")
