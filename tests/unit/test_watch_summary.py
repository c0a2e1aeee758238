"""`golive watch`'s typed summary and trigger records write watch/summary.json and
watch/records.jsonl with the keys, in the order, the files have always had; the window is
clean only when no rollback trigger fired (an alert leaves it clean)."""

from __future__ import annotations

import json

from golive.operate.watch_rules import Thresholds
from golive.operate.watch_summary import TriggerRecord, WatchSummary

RECORD_KEYS = [
    "time",
    "interval",
    "rule",
    "rollback",
    "reason",
    "evidence",
    "rollback_target",
    "command",
]
SUMMARY_KEYS = [
    "accepted",
    "intervals",
    "interval_s",
    "thresholds",
    "probe_case",
    "tool_probes",
    "engine_restarts",
    "http_status",
    "triggers",
    "rollback_target",
    "clean",
    "launch_not_compared",
]


def _trigger(rollback: bool) -> TriggerRecord:
    return TriggerRecord(
        time="2026-12-05T10:00:00Z",
        interval=3,
        rule="oom" if rollback else "queue",
        rollback=rollback,
        reason="r",
        evidence={"lines": ["x"]},
        rollback_target="no earlier accepted artifact in the registry",
    )


def _summary(*triggers: TriggerRecord) -> WatchSummary:
    return WatchSummary(
        accepted="/b",
        intervals=4,
        interval_s=5.0,
        thresholds=Thresholds(max_concurrency=8),
        probe_case="one_arg.required",
        tool_probes=2,
        engine_restarts=0,
        http_status={"2xx": 10.0},
        triggers=triggers,
        rollback_target=None,
        launch_not_compared=None,
    )


def test_the_files_keep_their_keys_in_order() -> None:
    """summary.json and each records.jsonl line: the former keys, in order, and JSON-ready."""
    alert = _trigger(rollback=False)
    assert list(alert.to_json()) == RECORD_KEYS
    assert alert.to_json()["command"] is None
    data = _summary(alert).to_json()
    assert list(data) == SUMMARY_KEYS
    assert data["thresholds"]["max_concurrency"] == 8
    assert data["triggers"] == [alert.to_json()]
    assert json.loads(json.dumps(data)) == data


def test_only_a_rollback_trigger_makes_a_window_unclean() -> None:
    """An alert is reported and the window stays clean; a rollback trigger makes it unclean."""
    assert _summary().clean
    assert _summary(_trigger(rollback=False)).clean
    assert not _summary(_trigger(rollback=False), _trigger(rollback=True)).clean
    assert _summary(_trigger(rollback=True)).to_json()["clean"] is False
