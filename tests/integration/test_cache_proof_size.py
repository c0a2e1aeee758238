"""Issue 29 §2, the cache proof's size on the fake engine and the recorded demo: a server
without /tokenize still gets a proof of the profile's prefix (two warm-ups size it), and a
proof size edited in the steps is never judged."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CACHE_PROTOCOL, CACHE_STEPS
from golive.bundle.store import Bundle
from golive.cli.main import main
from golive.orchestration.rederive import rederive
from golive.results import Outcome, Status
from tests.helpers.fakes.vllm import FakeState, fake_vllm

GOLDEN = Path(__file__).parents[1] / "data/golden-demo"


async def test_a_server_without_tokenize_still_gets_the_profiles_prefix(tmp_path: Path) -> None:
    """No /tokenize (a gateway that does not pass it on): golive's assumed 1.4 tokens a word
    misses the stand-in's one a word by far, so a second warm-up is sent and the line
    through their counts sizes the proof; the cold prompt lands on the profile's 1,024
    tokens and the coverage holds no size gap (it did: a false hold, under kimi-k3 with no
    owner to relax it)."""
    out = tmp_path / "b"
    async with fake_vllm(FakeState(tokenize=False)) as url:
        code = await asyncio.to_thread(main, ["cache", "--target", url, "--out", str(out)])
    assert code in (0, 10, 11), code  # the stand-in keeps no prefix cache: reuse is not shown
    protocol = json.loads((out / CACHE_PROTOCOL).read_text())
    assert protocol["calibration"].startswith("assumed (no /tokenize); sized from the warm-ups'")
    rows = [json.loads(line) for line in (out / CACHE_STEPS).read_text().splitlines()]
    assert [r["step"] for r in rows[:3]] == ["warmup", "warmup-2", "cold-0"]
    assert abs(rows[2]["prompt_tokens"] - 1024) <= 0.02 * 1024
    checks = {c["id"]: c for c in json.loads((out / "verdict.json").read_text())["checks"]}
    assert checks["cache.coverage"]["status"] == "pass", checks["cache.coverage"]["summary"]


def _golden_copy(tmp_path: Path, edit: Callable[[list[dict[str, Any]]], None]) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(GOLDEN, copy)
    rows = [json.loads(line) for line in (copy / CACHE_STEPS).read_text().splitlines()]
    edit(rows)
    (copy / CACHE_STEPS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    Bundle(copy).seal()
    return copy


def _forget_prompt(rows: list[dict[str, Any]]) -> None:
    next(r for r in rows if r["step"] == "cold-0")["prompt_tokens"] = None


def _second_cold(rows: list[dict[str, Any]]) -> None:
    at = next(i for i, r in enumerate(rows) if r["step"] == "cold-0")
    rows.insert(at, {**rows[at], "prompt_tokens": 4096})


@pytest.mark.tampers_bundle
@pytest.mark.parametrize("edit", [_forget_prompt, _second_cold], ids=["null", "duplicate"])
def test_a_proof_size_edited_in_the_steps_is_not_judged(
    tmp_path: Path, edit: Callable[[list[dict[str, Any]]], None]
) -> None:
    """The cold step's prompt count removed, or a second cold-0 row claiming a larger prompt
    put before the real one, then re-sealed: the steps no longer match the records behind
    them, so the proof is not judged (no_data, hold) — never a proof that looks bigger."""
    again = rederive(_golden_copy(tmp_path, edit))
    reuse = next(c for c in again.checks if c.id == "cache.prefix_reuse")
    assert reuse.status is Status.NO_DATA
    assert "does not match the scrapes and records behind it" in reuse.summary
    assert again.decision.outcome is Outcome.HOLD
