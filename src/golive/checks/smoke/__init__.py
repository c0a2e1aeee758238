"""The smoke family: post-start requests and the request classes; collectors send and save, judges
read the bundle.
"""

from golive.bundle.layout import SMOKE_PLAN
from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext
from golive.checks.coverage import SMOKE as SMOKE_COVERAGE
from golive.checks.family import EvidenceJudge, Saved, judged
from golive.checks.smoke.collect import SmokePlan as Plan
from golive.checks.smoke.collect import run_smoke
from golive.checks.smoke.judge import CHECKS as SMOKE_CHECKS
from golive.checks.smoke.judge import judge_smoke
from golive.checks.smoke.request_classes import SUSTAINED_STREAM as SMOKE_SUSTAINED
from golive.checks.smoke.request_classes import judge_sessions, judge_short_sustained
from golive.checks.smoke.request_classes_judge import CHECKS as CLASS_CHECKS
from golive.checks.smoke.request_classes_judge import FILE as CLASSES_FILE
from golive.checks.smoke.request_classes_judge import judge_saved_classes, judge_smoke_coverage
from golive.results import CheckResult

JUDGES: tuple[EvidenceJudge, ...] = (
    EvidenceJudge(
        "smoke",
        (*SMOKE_CHECKS, SMOKE_COVERAGE),
        SMOKE_PLAN,
        lambda r, s: [*judge_smoke(r, s.config), *judge_smoke_coverage(r, s.config)],
        "smoke",
        always=True,
    ),
    EvidenceJudge(
        "smoke.classes",
        CLASS_CHECKS,
        f"requests/{CLASSES_FILE}.jsonl",  # written when the classes run (not when smoke stops)
        lambda r, s: judge_saved_classes(r, s.config),
        "smoke",
    ),
    EvidenceJudge(
        "smoke.concurrent_sessions",
        ("smoke.concurrent_sessions",),
        f"requests/{CLASSES_FILE}.jsonl",
        lambda r, s: [judge_sessions(r, s.config)],
        "smoke",
    ),
    EvidenceJudge(
        "smoke.sustained",
        ("smoke.sustained",),
        SMOKE_SUSTAINED,
        lambda r, s: [judge_short_sustained(r, s.config)],
        "smoke",
    ),
)


async def collect(ctx: CheckContext, plan: Plan) -> list[CheckResult]:
    """The smoke requests and, where configured, the request classes; saved and judged.
    `plan` is empty: smoke reads its settings from the run's config."""
    return await run_smoke(ctx)


def judge(evidence: BundleReader, saved: Saved) -> list[CheckResult]:
    """The smoke and request-class checks again from their saved answers."""
    return judged(JUDGES, evidence, saved)


__all__ = ["JUDGES", "Plan", "collect", "judge"]
