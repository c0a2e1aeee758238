"""The production client's timeout and retry policy (issue 29 §5), applied to the
concurrent phase's requests as production would send them.

Each attempt is a record. One that is retried is kept in the window's stream under its own
label (`<window>~retried<k>`). A retry is sent as a new request (its send lag and latency
its own: the backoff is the client's choice, not golive's lag). The window counts its
retries and timed-out attempts; a retried attempt the server failed as a defect does (a
server error other than load shedding, a dropped connection) still counts as a failed
request, so a retry never hides it — only load shedding (429, 503) and the client's own
timeout are counted as retries alone, and a retry storm makes a window unstable.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.request_line import RequestRecordLine
from golive.config import ClientConfig
from golive.traffic.records import FailureKind, RequestRecord

RETRIED = "~retried"  # `<window label>~retried<k>`: the k-th attempt, retried after it failed
Chat = Callable[[Mapping[str, Any], str, int | None, float | None], Awaitable[RequestRecord]]
_RETRIED_FAILURES = (FailureKind.CONNECT, FailureKind.TIMEOUT, FailureKind.DISCONNECTED)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """`client.*` in the config: a whole-request timeout (None: golive's own deadline), up
    to `retries` more attempts on a retryable failure, waiting `backoff_s` doubled each time
    (at most `backoff_max_s`)."""

    timeout_s: float | None = None
    retries: int = 0
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    statuses: tuple[int, ...] = (429, 500, 502, 503, 504)

    @classmethod
    def of(cls, config: ClientConfig) -> RetryPolicy:
        """The policy `client.*` in the config names."""
        return cls(
            config.timeout_s,
            config.retries,
            config.backoff_s,
            config.backoff_max_s,
            tuple(config.retry_statuses),
        )

    def retryable(self, record: RequestRecord) -> bool:
        """A failure production's client would retry: a listed HTTP status, or no answer
        (refused, timed out, cut off). Never a cancel: golive ended that one itself."""
        if record.ok:
            return False
        if record.status is not None:
            return record.status in self.statuses
        failure = record.failure
        return failure is not None and failure.kind in _RETRIED_FAILURES

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before attempt `attempt` + 1 (1-based: the first retry waits
        `backoff_s`)."""
        return float(min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))


def retried_label(label: str, attempt: int) -> str:
    return f"{label}{RETRIED}{attempt}"


def is_retried(label: object) -> bool:
    """A record's label says it was retried (a later attempt answered in its place)."""
    return RETRIED in str(label)


async def send_with_retries(
    chat: Chat,
    body: Mapping[str, Any],
    label: str,
    scheduled_ns: int | None,
    policy: RetryPolicy,
    retried: Callable[[RequestRecord], None],
    pause: Callable[[RequestRecord], Awaitable[None]] | None = None,
    closing: asyncio.Event | None = None,
) -> RequestRecord:
    """One request as the production client sends it: each attempt bounded by the policy's
    timeout; a retryable failure, while attempts remain, is first shown to `pause` (a health
    check on a lost connection), then handed to `retried` (relabelled) and sent again after
    the backoff. `closing` (the window ends, the engine died) stops the retrying, also in the
    middle of a backoff: the last failure then stands as the request's answer. Returns the
    last attempt; a retried one's latency from the intended time counts from when the first
    attempt was meant to leave (`Timings.first_intended_ns`)."""
    attempt = 0
    first_intended: int | None = None
    while True:
        record = await chat(body, label, scheduled_ns if attempt == 0 else None, policy.timeout_s)
        if first_intended is None:
            first_intended = record.timings.scheduled_ns
        else:  # the user waited for every attempt: its latency counts from the first's intent
            timings = dataclasses.replace(record.timings, first_intended_ns=first_intended)
            record = dataclasses.replace(record, timings=timings)
        if attempt >= policy.retries or not policy.retryable(record):
            return record
        if pause is not None:
            await pause(record)
        if closing is not None and closing.is_set():
            return record
        if closing is None:
            await asyncio.sleep(policy.backoff(attempt + 1))
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), policy.backoff(attempt + 1))
            if closing.is_set():
                return record
        attempt += 1
        retried(dataclasses.replace(record, label=retried_label(label, attempt)))


SHED = (429, 503)  # load shedding: a retry is the remedy production applies


def judged(label: str, status: int | None, failure: str | None) -> bool:
    """Whether an attempt counts in its window's figures: a last attempt does, and a retried
    one that failed as a defect (a server error other than 429/503, a dropped connection);
    one shed by the server or timed out by the client counts as a retry alone. `failure`:
    its failure's kind (`FailureKind`'s value), None for none."""
    if not is_retried(label):
        return True
    return status not in SHED and not timed_out(failure)


def window_of(label: object) -> str:
    """The window a record's label belongs to: `c4` for `c4`, `c4@worker-1`, `c4~retried2`."""
    return str(label).split("@")[0].split(RETRIED)[0]


def timed_out(failure: str | None) -> bool:
    """A failure of this kind is the client's own timeout."""
    return failure == FailureKind.TIMEOUT.value


class RetryTally:
    """Each window's retried attempts, kept as they arrive (the in-process path's are not in
    the schedule's records)."""

    def __init__(self) -> None:
        self._retried: dict[str, dict[str, RequestRecord]] = {}

    def count(self, record: RequestRecord) -> None:
        if is_retried(record.label):
            self._retried.setdefault(window_of(record.label), {})[record.request_id] = record

    def take(self, label: str) -> list[RequestRecord]:
        """The window's retried attempts, forgotten once read."""
        return list(self._retried.pop(label, {}).values())


def attempt_counts(attempts: Iterable[RequestRecord]) -> tuple[int, int]:
    """Retries and timeouts among a window's attempts as sent: `retry_counts` of the records
    before they were saved."""
    retries = timeouts = 0
    for record in attempts:
        retries += is_retried(record.label)
        timeouts += record.failure is not None and record.failure.kind is FailureKind.TIMEOUT
    return retries, timeouts


def retry_counts(attempts: Sequence[RequestRecordLine]) -> tuple[int, int]:
    """Retries and timeouts among a window's saved attempts: retried attempts, and attempts
    (retried or last) that ran out of time."""
    retries = sum(1 for r in attempts if is_retried(r.label))
    return retries, sum(1 for r in attempts if timed_out(r.failure_kind))
