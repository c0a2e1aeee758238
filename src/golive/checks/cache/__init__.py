"""The cache family: `collect` sends the protocol and writes the evidence; `judge` derives
the checks from the bundle alone (in a run and again in `golive decide`)."""

from golive.bundle.layout import CACHE_PROTOCOL
from golive.bundle.store import BundleReader
from golive.checks.cache.collect import CacheProtocol, CacheSettings, probe_after_load, run_cache
from golive.checks.cache.collect import CacheSettings as Plan
from golive.checks.cache.judge import judge_cache
from golive.checks.context import CheckContext
from golive.checks.family import EvidenceJudge, Saved, judged
from golive.results import CheckResult

JUDGES: tuple[EvidenceJudge, ...] = (
    EvidenceJudge(
        "cache",
        ("cache.",),
        CACHE_PROTOCOL,
        lambda r, s: judge_cache(r, s.profile, s.config.programme, s.config.cache),
        "cache",
        always=True,
    ),
)


async def collect(ctx: CheckContext, plan: Plan) -> list[CheckResult]:
    """Send the cache protocol, save its steps and scrapes, judge them."""
    return await run_cache(ctx, plan)


def judge(evidence: BundleReader, saved: Saved) -> list[CheckResult]:
    """The cache checks again from the saved protocol."""
    return judged(JUDGES, evidence, saved)


__all__ = [
    "JUDGES",
    "CacheProtocol",
    "CacheSettings",
    "Plan",
    "collect",
    "judge",
    "judge_cache",
    "probe_after_load",
    "run_cache",
]
