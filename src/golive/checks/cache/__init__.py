"""The cache family: `collect` sends the protocol and writes the evidence; `judge` derives
the checks from the bundle alone (in a run and again in `golive decide`)."""

from golive.checks.cache.collect import CacheProtocol, CacheSettings, probe_after_load, run_cache
from golive.checks.cache.judge import judge_cache

__all__ = ["CacheProtocol", "CacheSettings", "judge_cache", "probe_after_load", "run_cache"]
