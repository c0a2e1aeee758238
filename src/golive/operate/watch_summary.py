"""What `golive watch` found, typed: each trigger it fired (a line of `watch/records.jsonl`)
and the window's summary (`watch/summary.json`, and `golive watch --json`). Their JSON is the
files' format, key for key and in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from golive.operate.watch_rules import Thresholds


@dataclass(frozen=True, slots=True)
class TriggerRecord:
    """A trigger the watch fired, with the rollback target and what `--on-rollback` did."""

    time: str
    interval: int
    rule: str
    rollback: bool  # a rollback trigger (else an alert)
    reason: str
    evidence: Mapping[str, object]
    rollback_target: Mapping[str, Any] | str  # the target's summary, or what to do without one
    command: Mapping[str, Any] | None = None  # the `--on-rollback` run; None: none was run

    def to_json(self) -> dict[str, Any]:
        """A line of `watch/records.jsonl` (and an entry of the summary's `triggers`)."""
        return {
            "time": self.time,
            "interval": self.interval,
            "rule": self.rule,
            "rollback": self.rollback,
            "reason": self.reason,
            "evidence": self.evidence,
            "rollback_target": self.rollback_target,
            "command": self.command,
        }


@dataclass(frozen=True, slots=True)
class WatchSummary:
    """The watch window: what it ran, what fired, and whether it ended clean."""

    accepted: str  # the accepted bundle watched against
    intervals: int
    interval_s: float
    thresholds: Thresholds
    probe_case: str  # the critical workflow's tool probe
    # the critical workflow's probe answered in so many intervals (0: this watch did not show
    # the tool path, whatever else it saw; watch.tool_every sets how often)
    tool_probes: int
    engine_restarts: int
    http_status: Mapping[str, float] | None  # answers by status class; None: not exposed
    triggers: tuple[TriggerRecord, ...]
    rollback_target: Mapping[str, Any] | None  # the registry's entry to go back to
    launch_not_compared: str | None  # why no launch was compared, if none was

    @property
    def clean(self) -> bool:
        """No rollback trigger fired (alerts may have)."""
        return not any(t.rollback for t in self.triggers)

    def to_json(self) -> dict[str, Any]:
        """`watch/summary.json`."""
        return {
            "accepted": self.accepted,
            "intervals": self.intervals,
            "interval_s": self.interval_s,
            "thresholds": asdict(self.thresholds),
            "probe_case": self.probe_case,
            "tool_probes": self.tool_probes,
            "engine_restarts": self.engine_restarts,
            "http_status": self.http_status,
            "triggers": [t.to_json() for t in self.triggers],
            "rollback_target": self.rollback_target,
            "clean": self.clean,
            "launch_not_compared": self.launch_not_compared,
        }
