"""Issue 29 §5: the production client's retry policy as golive applies it — what is retried
(listed statuses and no-answer failures; never a refusal or golive's own cancel), how long
it waits (doubling, capped), that every attempt is kept under its own label, and that a
window's retries and timeouts are counted again from its saved records."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from golive.bundle.request_line import decode_line, line_text
from golive.config import ClientConfig
from golive.traffic.records import (
    Failure,
    FailureKind,
    RequestRecord,
    Timings,
    parse,
    reparsed,
)
from golive.traffic.retry import (
    RetryPolicy,
    RetryTally,
    attempt_counts,
    is_retried,
    judged,
    retry_counts,
    send_with_retries,
    window_of,
)
from tests.helpers.record_lines import record_line


def _record(
    status: int | None, kind: FailureKind | None = None, label: str = "c4"
) -> RequestRecord:
    failure = None if kind is None else Failure(kind, kind.value)
    if status is not None and not 200 <= status < 300 and failure is None:
        failure = Failure(FailureKind.HTTP_STATUS, f"HTTP {status}")
    return RequestRecord(
        "id", label, "POST", "u", {}, False, 0.0, Timings(0, 0), status=status, failure=failure
    )


@pytest.mark.parametrize(
    ("status", "kind", "retried"),
    [
        (200, None, False),
        (503, None, True),
        (429, None, True),
        (500, None, True),
        (400, None, False),  # a refusal as configured: sending it again changes nothing
        (404, None, False),
        (None, FailureKind.CONNECT, True),
        (None, FailureKind.TIMEOUT, True),
        (None, FailureKind.DISCONNECTED, True),
        (None, FailureKind.CANCELLED, False),  # golive ended it: not the server's failure
    ],
)
def test_what_is_retried(status: int | None, kind: FailureKind | None, retried: bool) -> None:
    """The default statuses (429, 5xx gateway/server) and no answer at all are retried."""
    assert RetryPolicy(retries=2).retryable(_record(status, kind)) is retried


def test_backoff_doubles_up_to_its_cap() -> None:
    """0.5 s, 1 s, 2 s, ... never above backoff_max_s; the config's keys make the policy."""
    policy = RetryPolicy.of(ClientConfig(retries=5, backoff_s=0.5, backoff_max_s=3.0))
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.retries == 5
    assert policy.statuses == (429, 500, 502, 503, 504)


async def test_each_attempt_is_kept_and_the_last_returned() -> None:
    """Two 503s then an answer: the two failed attempts go to `retried` as `c4~retried1`
    and `c4~retried2`, each attempt has the policy's timeout, and the answer is returned. A
    retry is a new send (no intended time of its own: the backoff is not golive's lag)."""
    answers = [_record(503), _record(503), _record(200)]
    calls: list[tuple[int | None, float | None]] = []
    kept: list[RequestRecord] = []

    async def chat(
        body: Mapping[str, Any], label: str, scheduled: int | None, deadline: float | None
    ) -> RequestRecord:
        calls.append((scheduled, deadline))
        return answers.pop(0)

    policy = RetryPolicy(timeout_s=7.0, retries=3, backoff_s=0.001)
    final = await send_with_retries(chat, {}, "c4", 123, policy, kept.append)
    assert final.status == 200
    assert [r.label for r in kept] == ["c4~retried1", "c4~retried2"]
    assert calls == [(123, 7.0), (None, 7.0), (None, 7.0)]


async def test_a_retried_answer_is_as_slow_as_the_user_waited() -> None:
    """A request timed out after 30 s and answered in 0.5 s on its retry: its latency from the
    intended time is 30.5 s plus the backoff between, not the last attempt's 0.5 s (a retry
    storm must not read as fast answers); its schedule lag is still its own send's (the
    backoff is not golive's lag)."""
    second = 1_000_000_000
    first = RequestRecord(
        "a", "c4", "POST", "u", {}, False, 0.0, Timings(5 * second, 5 * second, end_ns=35 * second),
        failure=Failure(FailureKind.TIMEOUT, "no answer in 30 s"),
    )  # fmt: skip
    answered = RequestRecord(
        "b", "c4", "POST", "u", {}, False, 0.0,
        Timings(36 * second, 36 * second, end_ns=36 * second + second // 2), status=200,
    )  # fmt: skip
    answers = [first, answered]

    async def chat(
        body: Mapping[str, Any], label: str, scheduled: int | None, deadline: float | None
    ) -> RequestRecord:
        return answers.pop(0)

    policy = RetryPolicy(timeout_s=30.0, retries=2, backoff_s=0.001)
    final = await send_with_retries(chat, {}, "c4", 5 * second, policy, lambda r: None)
    line = decode_line(line_text(parse(final).saved_line(True)), "requests/x.jsonl line 1")
    saved = line.timings_ms
    assert saved.end_from_intended == 31_500.0
    assert saved.end == 500.0
    assert saved.schedule_lag == 0.0
    assert saved.retry_wait == 31_000.0  # what decide checks the times against
    assert reparsed(line).e2e_from_intended_ms == 31_500.0


async def test_retries_end_when_spent_or_when_the_window_closes() -> None:
    """Out of retries, the last failure is returned as the answer; a window closing (its end,
    the engine's death) ends the retrying, also in the middle of a backoff, and the failure
    then stands as the request's answer."""

    async def failing(
        body: Mapping[str, Any], label: str, scheduled: int | None, deadline: float | None
    ) -> RequestRecord:
        return _record(503)

    kept: list[RequestRecord] = []
    policy = RetryPolicy(retries=2, backoff_s=0.001)
    final = await send_with_retries(failing, {}, "c4", None, policy, kept.append)
    assert (final.status, final.label, len(kept)) == (503, "c4", 2)
    kept.clear()
    closing = asyncio.Event()
    slow = RetryPolicy(retries=2, backoff_s=30.0)
    task = asyncio.ensure_future(
        send_with_retries(failing, {}, "c4", None, slow, kept.append, None, closing)
    )
    await asyncio.sleep(0.05)  # in its 30 s backoff
    closing.set()
    final = await asyncio.wait_for(task, 2.0)
    assert (final.label, kept) == ("c4", [])


@pytest.mark.parametrize(
    ("label", "status", "kind", "counted"),
    [
        ("c4", 500, None, True),  # a last attempt always counts
        ("c4~retried1", 500, None, True),  # a server error a retry cured still counts
        ("c4~retried1", None, FailureKind.DISCONNECTED, True),  # so does a dropped connection
        ("c4~retried1", 503, None, False),  # load shed: a retry alone
        ("c4~retried1", 429, None, False),
        ("c4~retried1", None, FailureKind.TIMEOUT, False),  # the client's own timeout
    ],
)
def test_a_retry_never_hides_a_defect(
    label: str, status: int | None, kind: FailureKind | None, counted: bool
) -> None:
    """Which attempts a window's figures count: a retried attempt the server failed as a
    defect does (a 500, a dropped connection) stays a failed request — one HTTP 500 at
    concurrency 1 is a first-step failure whether or not a retry answered it."""
    assert judged(label, status, None if kind is None else kind.value) is counted


def test_counted_live_and_again_from_the_records() -> None:
    """The run's tally and the re-count from saved lines agree: retried attempts on any
    client (`c4@worker-1~retried1`), timeouts among all attempts; other windows apart."""
    records = [
        _record(503, label="c4~retried1"),
        _record(None, FailureKind.TIMEOUT, label="c4@worker-1~retried1"),
        _record(200, label="c4@worker-1"),
        _record(None, FailureKind.TIMEOUT, label="c4"),
        _record(200, label="c8"),
    ]
    tally = RetryTally()
    for number, record in enumerate(records):
        tally.count(dataclasses.replace(record, request_id=f"r{number}"))
    lines = [
        record_line(
            label=r.label,
            failure=None if r.failure is None else {"kind": r.failure.kind.value, "message": "x"},
        )
        for r in records
    ]
    assert [r.label for r in tally.take("c4")] == ["c4~retried1", "c4@worker-1~retried1"]
    assert tally.take("c4") == []  # read once
    c4 = [line for line in lines if window_of(line.label) == "c4"]
    live = attempt_counts(r for r in records if window_of(r.label) == "c4")
    assert live == retry_counts(c4) == (2, 2)
    assert retry_counts([line for line in lines if window_of(line.label) == "c8"]) == (0, 0)
    assert window_of("c4@worker-1~retried3") == "c4"
    assert is_retried("c4~retried1")
    assert not is_retried("c4@worker-1")
