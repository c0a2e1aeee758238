"""Issue 29 §5: the concurrent phase sends with the production client's timeout and retry
policy (`client.timeout_s`, `client.retries`, backoff); each window counts its retries and
timed-out attempts, from records kept under their own label, and a retry storm is a limit.

The fake stands in for a front end shedding load (503 past two requests in flight, served
when the same request is sent again): the real CPU engine queues instead of refusing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_LONG_INPUT_REQUESTS,
    CAPACITY_STEPS,
)
from golive.bundle.store import ZSTD, Bundle, BundleReader, read_lines
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.results import CheckResult, Outcome
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.scenario import FAKE_CAPACITY

SHORT = {
    **FAKE_CAPACITY,
    "capacity.client_max_lag_ms": 100.0,
    "capacity.client_max_cpu_share": 1.0,
}


async def _capacity(out: Path, fault: str = "overloaded", **client: Any) -> Verdict:
    state = FakeState(fault=fault, knee_at=2)
    async with fake_vllm(state) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        settings = {"target.url": url, **SHORT, **{f"client.{k}": v for k, v in client.items()}}
        return await judge(load_config(None, settings), out, "capacity", programme, ("capacity",))


def _step(out: Path, concurrency: int) -> dict[str, Any]:
    rows = [json.loads(line) for line in (out / CAPACITY_STEPS).read_text().splitlines()]
    return next(r for r in rows if r["concurrency"] == concurrency)


def _ramp(verdict: Verdict) -> dict[str, Any]:
    return next(c for c in verdict.data["checks"] if c["id"] == "capacity.concurrency")


async def test_retries_hide_the_errors_and_are_a_retry_storm(tmp_path: Path) -> None:
    """With two retries, every request at concurrency 4 is answered (no error), but about half
    only on a second attempt: a retry storm, so 4 is not stable and the limit is 2. The
    retried attempts are in the window's stream under `c4~retried1`, counted in its row, and
    `golive decide` counts them again from the records."""
    out = tmp_path / "b"
    verdict = await _capacity(out, retries=2, backoff_s=0.05)
    ramp = _ramp(verdict)
    assert ramp["measurements"]["classification"] == "limit-traffic", ramp["summary"]
    assert ramp["measurements"]["ceiling"] == 2
    assert "retry storm at concurrency 4" in ramp["summary"]
    c4, c2 = _step(out, 4), _step(out, 2)
    assert c4["errors"] == 0
    assert c4["retries"] > 0.05 * c4["completed"]
    assert (c2["retries"], c2["errors"]) == (0, 0)
    labels = [r["label"] for r in BundleReader(out).jsonl(CAPACITY_CONCURRENCY_REQUESTS)]
    assert labels.count("c4~retried1") == c4["retries"]
    assert verdict.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert verdict.data["limits"]["max_concurrency"] == 2
    assert rederive(out).agrees, rederive(out).problems


async def test_without_retries_the_same_load_fails(tmp_path: Path) -> None:
    """The same front end with the default client (no retries): the shed requests are
    errors at concurrency 4 (server errors, the limit 2), and no retry is counted."""
    out = tmp_path / "b"
    verdict = await _capacity(out)
    ramp = _ramp(verdict)
    assert ramp["measurements"]["ceiling"] == 2, ramp["summary"]
    c4 = _step(out, 4)
    assert c4["errors"] > 0
    assert c4["server_errors"] == c4["errors"]
    assert c4["retries"] == 0


async def test_a_retry_never_hides_a_server_error(tmp_path: Path) -> None:
    """An engine that fails every request once with HTTP 500 and answers it when sent again:
    with retries every request is answered, but each 500 is still a failed request — at
    concurrency 1 a first-step failure (a defect: hold), never stable and never a limit."""
    out = tmp_path / "b"
    verdict = await _capacity(out, "flaky_500", retries=2, backoff_s=0.05)
    ramp = _ramp(verdict)
    assert ramp["measurements"]["classification"] == "first-step-failure", ramp["summary"]
    c1 = _step(out, 1)
    assert c1["server_errors"] == c1["errors"] == c1["retries"] > 0
    assert verdict.outcome is Outcome.HOLD
    # the long-input ladder asks each size once, as it is: its 500s are not retried away
    ladder = next(c for c in verdict.data["checks"] if c["id"] == "capacity.long_input")
    assert ladder["status"] != "pass", ladder["summary"]
    labels = [r["label"] for r in BundleReader(out).jsonl(CAPACITY_LONG_INPUT_REQUESTS)]
    assert labels
    assert not [label for label in labels if "~retried" in label]
    assert rederive(out).agrees, rederive(out).problems


@pytest.mark.tampers_bundle
async def test_deleting_the_retried_attempts_is_caught(tmp_path: Path) -> None:
    """A reviewer who deletes the retried attempts from the records (and re-seals) does not
    get a window without retries: the row no longer matches its records, and the ramp is not
    judged from it."""
    out = tmp_path / "b"
    await _capacity(out, retries=2, backoff_s=0.05)
    source = out / (CAPACITY_CONCURRENCY_REQUESTS + ZSTD)
    kept = [line for line in read_lines(source) if line.strip() and "~retried" not in line]
    source.unlink()
    (out / CAPACITY_CONCURRENCY_REQUESTS).write_text("".join(f"{line}\n" for line in kept))
    Bundle(out).seal()
    again = rederive(out)
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status.value == "no_data"
    assert "retries" in ramp.summary
