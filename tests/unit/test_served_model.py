"""golive's one rule for the served model in a /v1/models answer: the configured model if
listed, else the first listed when none is configured, else none."""

from __future__ import annotations

from typing import Any

import pytest

from golive.checks.context import served_entry

TWO = {"data": [{"id": "base", "max_model_len": 8192}, {"id": "adapter", "max_model_len": 4096}]}


@pytest.mark.parametrize(
    ("body", "wanted", "entry_id", "listed"),
    [
        (TWO, None, "base", ["base", "adapter"]),  # none configured: the first listed
        (TWO, "adapter", "adapter", ["base", "adapter"]),  # the configured one, not the first
        (TWO, "other", None, ["base", "adapter"]),  # configured but not served: none
        ({"data": []}, None, None, []),
        ({"data": ["not-an-entry"]}, None, None, []),
        ({"error": "no"}, None, None, []),
        ("not json", None, None, []),
    ],
)
def test_served_entry(
    body: Any, wanted: str | None, entry_id: str | None, listed: list[str]
) -> None:
    """Each answer shape gives the entry the rule names, and every id it lists."""
    entry, served = served_entry(body, wanted)
    assert (None if entry is None else entry["id"]) == entry_id
    assert served == listed
