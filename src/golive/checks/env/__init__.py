"""The env family: `collect` gathers the version chain's evidence into the bundle; `judge` applies
the chain rules to it (and the Kubernetes and Ray judges to their saved answers).
"""

from golive.bundle.layout import CHAIN_INPUTS, K8S_PODS, RAY_NODES
from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext
from golive.checks.env.collect import EnvEvidence as Plan
from golive.checks.env.collect import run_env
from golive.checks.env.judge import CHAIN_CHECKS, judge_chain
from golive.checks.family import EvidenceJudge, Saved, judged
from golive.evidence.k8s_env import judge_pods
from golive.evidence.ray_env import judge_ray_nodes
from golive.results import CheckResult

JUDGES: tuple[EvidenceJudge, ...] = (
    EvidenceJudge(
        "environment.chain",
        CHAIN_CHECKS,
        CHAIN_INPUTS,
        lambda r, s: judge_chain(r, s.profile, s.config),
        "env",
        always=True,
    ),
    EvidenceJudge(
        "environment.k8s",
        ("environment.k8s_images", "environment.k8s_restarts"),
        K8S_PODS,
        lambda r, s: judge_pods(r),
        "env",
    ),
    EvidenceJudge(
        "environment.ray",
        ("environment.node_count", "environment.node."),
        RAY_NODES,
        lambda r, s: judge_ray_nodes(r),
        "env",
    ),
)


async def collect(ctx: CheckContext, plan: Plan) -> list[CheckResult]:
    """Save the chain's evidence (hosts, container, log, live server, pods, Ray nodes) and
    judge it."""
    return await run_env(ctx, plan)


def judge(evidence: BundleReader, saved: Saved) -> list[CheckResult]:
    """The environment checks again from the saved evidence."""
    return judged(JUDGES, evidence, saved)


__all__ = ["JUDGES", "Plan", "collect", "judge"]
