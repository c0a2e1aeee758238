"""One ramp step's measured row: what the capacity rules judge, written as a line of
`metrics/capacity-steps.jsonl` and read back from it by `golive decide`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StepStats:
    """One concurrency step of the Agent-traffic phase."""

    concurrency: int
    completed: int
    errors: int
    wall_s: float
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    ttft_p95_s: float | None
    queue_mean_s: float | None  # from the engine's request_queue_time histogram
    max_waiting: float | None
    max_running: float | None
    preemptions: float | None
    engine_died: bool = False
    mean_waiting: float | None = None  # the engine's waiting gauge, averaged over the step
    refused: int = 0  # errors that were HTTP 4xx (counted in `errors` too)
    refused_detail: str = ""  # the server's message for the first of them
    # every failure classified, the first quoted (`failures.py`): read by the judges from
    # the bundle's records (scrubbed of the API key), never saved in the row
    failure_detail: str = ""
    server_errors: int = 0  # HTTP 5xx answers (counted in `errors` too)
    cancelled: int = 0  # ended by golive when the window ran out (counted in `errors` too)
    coverage: str | None = None  # why the load did not cover the window (None: it did)
    stall: str | None = None  # the engine stopped producing with requests in flight
    engine_held: float | None = None  # mean running + waiting requests the engine reported
    # the p95s' sample counts and 95% upper bounds (None: too few samples to bound them)
    e2e_samples: int | None = None
    e2e_p95_upper_s: float | None = None
    ttft_samples: int | None = None
    ttft_p95_upper_s: float | None = None
    # the production client's policy (`client.*`): attempts retried, attempts out of time
    retries: int = 0
    timeouts: int = 0
    # the memory curve's rows [first, last) the gauge figures were read from (decide reads
    # them again: `recorded.curve_differences`); None where the window states no gauges
    curve_rows: tuple[int, int] | list[int] | None = None

    def to_json(self) -> dict[str, object]:
        """One line of `metrics/capacity-steps.jsonl`."""
        row = {**dataclasses.asdict(self), "throughput_rps": self.throughput_rps}
        del row["failure_detail"]
        return row

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> StepStats:
        """Read back a line of `metrics/capacity-steps.jsonl` (derived keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})

    @property
    def engine_measured(self) -> bool:
        """Whether the engine's own queue gauges or histogram were read during the step."""
        return self.max_running is not None or self.queue_mean_s is not None

    @property
    def throughput_rps(self) -> float:
        return self.completed / self.wall_s if self.wall_s > 0 else 0.0
