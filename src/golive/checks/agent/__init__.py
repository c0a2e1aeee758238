"""The Agent family: the tool-call contract suite (collect) and its judgement from the saved
answers.
"""

from golive.bundle.layout import AGENT_PLAN
from golive.bundle.store import BundleReader
from golive.checks.agent.collect import AgentSettings as Plan
from golive.checks.agent.collect import run_agent
from golive.checks.agent.judge import judge_agent
from golive.checks.context import CheckContext
from golive.checks.family import EvidenceJudge, Saved, judged
from golive.results import CheckResult

JUDGES: tuple[EvidenceJudge, ...] = (
    EvidenceJudge(
        "agent",
        ("agent.",),
        AGENT_PLAN,
        lambda r, s: (
            judge_agent(
                r,
                s.profile,
                s.config.agent,
                s.config.programme,
                s.config.target.engine_url is not None,
            ).results
        ),
        "agent",
        always=True,
    ),
)


async def collect(ctx: CheckContext, plan: Plan) -> list[CheckResult]:
    """Send the contract suite's cases, save every answer, judge them."""
    return await run_agent(ctx, plan)


def judge(evidence: BundleReader, saved: Saved) -> list[CheckResult]:
    """The agent checks again from the saved answers."""
    return judged(JUDGES, evidence, saved)


__all__ = ["JUDGES", "Plan", "collect", "judge"]
