"""What the prefix cache keeps (retention): granularity for a full-attention cache, the
retention interval for a hybrid (recurrent + attention) one. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from golive.checks.cache.rules import CACHE_RESULT, LoggedCache
from golive.results import CheckResult, Status


def retention_setting(
    labels: Mapping[str, str], logged: LoggedCache | None
) -> tuple[str | None, str | None, bool]:
    """The cache's mamba mode and retention interval (the startup log's word over the
    engine's cache_config_info), and whether the cache is hybrid (recurrent + attention)."""
    mode = labels.get("mamba_cache_mode") or (logged.mamba_cache_mode if logged else None)
    interval = labels.get("prefix_cache_retention_interval")
    if logged is not None and logged.retention_interval is not None:
        interval = logged.retention_interval
    return mode, interval, mode not in (None, "none", "None")


def interval_unset(interval: str | None) -> bool:
    """No retention interval configured (absent, None or 0)."""
    return interval in (None, "None", "0")


def retention_result(
    labels: Mapping[str, str], logged: LoggedCache | None, block: int | None, prompt_tokens: int
) -> CheckResult:
    mode, interval, hybrid = retention_setting(labels, logged)
    boundaries = (
        "hybrid cache: reuse relies on prompt-end checkpoints and interval checkpoints "
        f"(retention interval {interval})"
        if hybrid
        else f"full-attention cache: reuse is block-granular ({block}-token blocks); "
        "no prompt-end checkpoint needed"
    )
    measurements = {
        "mamba_cache_mode": mode,
        "retention_interval": interval,
        "block_size": block,
        "enable_prefix_caching": labels.get("enable_prefix_caching"),
        "prompt_tokens": prompt_tokens,
    }
    if not labels and logged is None:
        return CACHE_RESULT(
            "cache.retention",
            Status.NO_DATA,
            "retention policy unknown (no cache_config_info, no log)",
            measurements,
            critical=False,
        )
    return judge_retention(measurements, hybrid, boundaries)


def judge_retention(measurements: Mapping[str, Any], hybrid: bool, boundaries: str) -> CheckResult:
    """What the cache keeps must be known: on, with its granularity (blocks) or, for a
    hybrid cache, a documented retention interval."""
    enabled = measurements.get("enable_prefix_caching")
    if enabled is not None and str(enabled) != "True":
        return CACHE_RESULT(
            "cache.retention",
            Status.FAIL,
            "prefix caching is off in the engine config: no prefix is retained at all",
            measurements,
            critical=False,
        )
    if hybrid and interval_unset(measurements.get("retention_interval")):
        return CACHE_RESULT(
            "cache.retention",
            Status.WARN,
            f"hybrid cache (mamba cache mode {measurements.get('mamba_cache_mode')}) with no "
            "retention interval: recurrent state is kept only at prompt ends, so a shared "
            "prefix is reused only where a checkpoint falls; document the retention policy "
            "(--prefix-cache-retention-interval)",
            measurements,
            critical=False,
        )
    if not hybrid and measurements.get("block_size") is None:
        return CACHE_RESULT(
            "cache.retention",
            Status.NO_DATA,
            "the cache's block size is unknown (no cache_config_info block_size): its reuse "
            "granularity cannot be stated",
            measurements,
            critical=False,
        )
    return CACHE_RESULT("cache.retention", Status.PASS, boundaries, measurements, critical=False)
