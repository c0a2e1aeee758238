"""target.identity judged from request records: every answer must come from the model asked
(and served, where the bundle holds the /v1/models answer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import BundleReader
from golive.checks.identity import judge_identity
from golive.results import Status
from tests.helpers.record_lines import BARE

CHAT = "http://127.0.0.1:8000/v1/chat/completions"
MODELS = "http://127.0.0.1:8000/v1/models"


def _chat(asked: str, answered: str | None, status: int = 200) -> dict[str, Any]:
    response: dict[str, Any] = {"choices": []}
    if answered is not None:
        response["model"] = answered
    keys = {"url": CHAT, "http_status": status, "request": {"model": asked}, "response": response}
    return {**BARE, **keys}


def _models(*ids: str) -> dict[str, Any]:
    listed = {"data": [{"id": i} for i in ids]}
    return {**BARE, "url": MODELS, "http_status": 200, "response": listed}


@pytest.mark.parametrize(
    ("records", "status", "phrase"),
    [
        ([_models("m"), _chat("m", "m"), _chat("m", "m")], Status.PASS, "m x2 of 2 answers"),
        ([_chat("m", "m"), _chat("m", "other")], Status.FAIL, "other (asked m) x1"),
        # the model asked is echoed, but /v1/models says this server serves another
        ([_models("served"), _chat("m", "m")], Status.FAIL, "m (not served here) x1"),
        ([_chat("m", None), _chat("m", None)], Status.NO_DATA, "none of the 2 answers"),
        ([_chat("m", "m"), _chat("m", None)], Status.PASS, "1 more were saved without"),
        # refused answers say nothing of which model answers
        ([_chat("m", "m"), _chat("m", "other", status=500)], Status.PASS, "m x1 of 1 answers"),
    ],
)
def test_answers_are_held_to_the_model_asked(
    tmp_path: Path, records: list[dict[str, Any]], status: Status, phrase: str
) -> None:
    """Each answer's `model` against the request's and the served list."""
    (tmp_path / "requests").mkdir()
    lines = "".join(json.dumps(r) + "\n" for r in records) + "not json\n"
    (tmp_path / "requests/smoke.jsonl").write_text(lines)
    (result,) = judge_identity(BundleReader(tmp_path))
    assert result.status is status, result.summary
    assert result.critical
    assert phrase in result.summary


def test_no_chat_answer_no_result(tmp_path: Path) -> None:
    """A bundle without chat answers (the env section) gets no identity result."""
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests/env.jsonl").write_text(json.dumps(_models("m")) + "\n")
    assert judge_identity(BundleReader(tmp_path)) == []
