"""The watch's triggers, interval by interval."""

from __future__ import annotations

from dataclasses import replace

import pytest

from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.operate.watch_rules import Observation, Thresholds, classify_log, evaluate

OK = Observation(t=0.0, healthy=True, running=1.0, waiting=0.0)
TH = Thresholds(max_waiting=1.0, max_concurrency=4, repeated=3, cache_floor=0.4, missing_limit=3)


def _rules(history: list[Observation], th: Thresholds = TH) -> list[str]:
    return [t.rule for t in evaluate(history, th)]


@pytest.mark.parametrize(
    ("history", "rules"),
    [
        ([OK] * 5, []),
        # health: two unhealthy intervals in a row, not one
        ([OK, replace(OK, healthy=False)], []),
        ([OK, replace(OK, healthy=False), replace(OK, healthy=False)], ["engine-health"]),
        # queue: three consecutive intervals outside the envelope, by waiting or by concurrency
        ([replace(OK, waiting=3.0)] * 2, []),
        ([replace(OK, waiting=3.0)] * 3, ["queue-envelope"]),
        ([replace(OK, running=6.0)] * 3, ["queue-envelope"]),
        ([replace(OK, waiting=3.0), OK, replace(OK, waiting=3.0)], []),
        # cache: two probes in a row under the floor
        ([replace(OK, cache_ratio=0.8), replace(OK, cache_ratio=0.0)], []),
        ([replace(OK, cache_ratio=0.0), OK, replace(OK, cache_ratio=0.1)], ["cache-regression"]),
        # tool calls: two failed probes, or parser failures in two intervals
        (
            [replace(OK, tool_probe_ok=False), OK, replace(OK, tool_probe_ok=False)],
            ["tool-call-schema"],
        ),
        ([replace(OK, tool_probe_ok=False), replace(OK, tool_probe_ok=True)], []),
        ([replace(OK, parse_failures=2.0)] * 2, ["tool-call-schema"]),
        # OOM fires at once; node errors are alerts
        ([replace(OK, oom_lines=("torch.OutOfMemoryError: CUDA out of memory",))], ["oom"]),
        ([replace(OK, comm_lines=("NCCL WARN ...",))], ["node-errors"]),
        # HTTP 5xx above 5% of the answers for three intervals: an alert; unmeasured is silent
        ([replace(OK, http_status={"2xx": 90.0, "5xx": 10.0})] * 3, ["http-errors"]),
        ([replace(OK, http_status={"2xx": 90.0, "5xx": 10.0})] * 2, []),
        ([replace(OK, http_status={"2xx": 99.0, "5xx": 1.0})] * 3, []),
        ([replace(OK, http_status={"2xx": 0.0})] * 3, []),
        ([replace(OK, http_status=None)] * 3, []),
        # intervals without answers neither break nor complete a run of 5xx intervals
        (
            [
                replace(OK, http_status={"5xx": 2.0}),
                OK,
                replace(OK, http_status={"5xx": 1.0}),
                replace(OK, http_status={"2xx": 0.0}),
                replace(OK, http_status={"2xx": 1.0, "5xx": 1.0}),
            ],
            ["http-errors"],
        ),
        ([replace(OK, http_status={"5xx": 2.0})] * 3 + [OK], []),
        (
            [replace(OK, http_status={"5xx": 2.0}), replace(OK, http_status={"2xx": 50.0})]
            + [replace(OK, http_status={"5xx": 2.0})] * 2,
            [],
        ),
        # an engine restart with an OOM line (this interval or the last) is the OOM trigger;
        # one no line explains is an alert
        (
            [
                replace(OK, oom_lines=("torch.OutOfMemoryError: CUDA out of memory",)),
                replace(OK, healthy=False, engine_restart="process start time moved"),
            ],
            ["oom"],
        ),
        ([replace(OK, engine_restart="process start time moved")], ["engine-restart"]),
        # the line came when it died; the model took several silent intervals to load again
        (
            [
                OK,
                replace(OK, metrics_ok=False, oom_lines=("CUDA out of memory",)),
                *[replace(OK, metrics_ok=False, healthy=True)] * 4,
                replace(OK, engine_restart="process start time moved"),
            ],
            ["oom"],
        ),
        # silence: an alert that freezes the envelope rules (no blind rollback)
        (
            [replace(OK, metrics_ok=False, running=None, waiting=None, cache_ratio=0.0)] * 3,
            ["metrics-silent"],
        ),
    ],
)
def test_triggers(history: list[Observation], rules: list[str]) -> None:
    """Each history of observations fires the watch rules the checklist names for it."""
    assert _rules(history) == rules


def test_rollback_versus_alert() -> None:
    """Bad health twice is a rollback; metrics missing is an alert, since silence is not health."""
    (health,) = evaluate([replace(OK, healthy=False)] * 2, TH)
    assert health.rollback
    (silent,) = evaluate([replace(OK, metrics_ok=False)] * 3, TH)
    assert not silent.rollback
    assert "silence is not health" in silent.reason


def test_a_restart_explained_by_oom_names_both() -> None:
    """The OOM rollback after a restart says the engine restarted and keeps the OOM line; an
    unexplained restart is not a rollback and says where its cause would be."""
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    restart = "process start time moved from 1795995212 to 1795996000"
    (oom,) = evaluate([replace(OK, oom_lines=(line,)), replace(OK, engine_restart=restart)], TH)
    assert oom.rollback
    assert restart in oom.reason
    assert oom.evidence["lines"] == (line,)
    (alone,) = evaluate([replace(OK, engine_restart=restart)], TH)
    assert not alone.rollback
    assert "OOMKilled" in alone.reason


def test_no_cache_floor_means_no_cache_trigger() -> None:
    """Without an accepted cache ratio there is no cache-regression trigger."""
    history = [replace(OK, cache_ratio=0.0)] * 2
    assert _rules(history, replace(TH, cache_floor=None)) == []


def test_log_lines_are_classified() -> None:
    """Log lines are classified as OOM, communication failures and container restarts."""
    oom, comm, restarts = classify_log(
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "node-b:123:456 [0] NCCL WARN Net : Connection closed by remote peer",
            "kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus",
            "Back-off restarting failed container vllm in pod kimi-0",
            "INFO all good",
        ]
    )
    assert len(oom) == 1
    assert len(comm) == 2
    assert len(restarts) == 1


def test_probe_reuse_is_never_zero_when_unmeasured() -> None:
    """Without --enable-prompt-tokens-details the API has no cached_tokens: the engine's
    counter decides, and with neither the probe says nothing (not a 0 that fires rollback)."""
    from golive.operate.watch_rules import probe_reuse_ratio

    assert probe_reuse_ratio(1000, 800, None) == 0.8
    assert probe_reuse_ratio(1000, None, 768.0) == 0.768
    assert probe_reuse_ratio(1000, None, 5000.0) == 1.0  # concurrent traffic: capped
    assert probe_reuse_ratio(1000, None, None) is None
    assert probe_reuse_ratio(None, 800, 800.0) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [("watch.repeated", 1000), ("watch.missing_limit", 1000), ("watch.max_5xx_share", 1.0)],
)
def test_a_watch_setting_that_would_switch_its_triggers_off_is_refused(
    key: str, value: float
) -> None:
    """A watch needing 1000 intervals outside the envelope, or tolerating every answer being
    a 5xx, fires nothing: refused as out of range, naming the key."""
    with pytest.raises(ConfigError, match=key.split(".")[1]):
        load_config(None, {key: value})
