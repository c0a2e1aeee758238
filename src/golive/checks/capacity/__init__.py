"""The capacity family: the four pressure phases (collect) and their judgement from the bundle."""

from golive.bundle.layout import (
    CAPACITY_LADDER,
    CAPACITY_SLO,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_WATCHDOG,
    DCGM_USED,
    MEMORY_CURVE,
    NODE_CURVES,
    RAY_GPU_CURVE,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.answer_probes import CHECK as ANSWERS_CHECK
from golive.checks.capacity.answer_probes import EVIDENCE as ANSWERS_EVIDENCE
from golive.checks.capacity.answer_probes import judge_answers
from golive.checks.capacity.collect import CapacityInputs as Plan
from golive.checks.capacity.judge import judge_headroom, judge_ramp, judge_sustained
from golive.checks.capacity.long_input import judge_long_input
from golive.checks.capacity.memory import CHECK as MEMORY_CHECK
from golive.checks.capacity.memory import judge_memory
from golive.checks.capacity.model_load import judge_model_load
from golive.checks.capacity.node_curves import CHECK as GPU_MEMORY_CHECK
from golive.checks.capacity.node_curves import asked_node_curves, judge_gpu_memory
from golive.checks.capacity.phases import run_capacity
from golive.checks.capacity.slo import CHECK as SLO_CHECK
from golive.checks.capacity.slo import asked_slo, judge_slo
from golive.checks.context import CheckContext
from golive.checks.coverage import CAPACITY as CAPACITY_COVERAGE
from golive.checks.coverage import with_sustained_coverage
from golive.checks.family import EvidenceJudge, Saved, judged
from golive.results import CheckResult

# the phases' rows; the client's headroom row follows the ledger's in the owner table
PHASES: tuple[EvidenceJudge, ...] = (
    EvidenceJudge(
        "capacity.model_load",
        ("capacity.model_load",),
        STARTUP_LOG,
        lambda r, s: [judge_model_load(r)],
        "capacity",
    ),
    EvidenceJudge(
        "capacity.long_input",
        ("capacity.long_input",),
        CAPACITY_LADDER,
        lambda r, s: [judge_long_input(r, s.config.capacity)],
        "capacity",
    ),
    EvidenceJudge(
        "capacity.concurrency",
        ("capacity.concurrency",),
        CAPACITY_STEPS,
        lambda r, s: [judge_ramp(r, s.config.capacity)],
        "capacity",
        always=True,
    ),
    EvidenceJudge(
        SLO_CHECK,
        (SLO_CHECK,),
        CAPACITY_SLO,
        lambda r, s: (
            [
                judge_slo(
                    r,
                    s.config,
                    judge_ramp(r, s.config.capacity),
                    judge_sustained(r, s.config.capacity),
                )
            ]
            if s.config.slo.stated
            else []
        ),
        "capacity",
        expected_if=asked_slo,
    ),
    EvidenceJudge(
        "capacity.sustained",
        ("capacity.sustained", CAPACITY_COVERAGE),
        CAPACITY_SUSTAINED,
        lambda r, s: with_sustained_coverage(
            judge_sustained(r, s.config.capacity), s.config.programme, s.config.capacity, s.profile
        ),
        "capacity",
    ),
    EvidenceJudge(
        MEMORY_CHECK,
        (MEMORY_CHECK,),
        MEMORY_CURVE,
        lambda r, s: judge_memory(r, s.config),
        "capacity",
        expected_with=(CAPACITY_STEPS,),  # the sampler runs before the first load window
    ),
    EvidenceJudge(
        GPU_MEMORY_CHECK,
        (GPU_MEMORY_CHECK,),
        NODE_CURVES,
        lambda r, s: judge_gpu_memory(r, s.config),
        "capacity",
        # the nodes' own lines or the exporter's answers say the run read node curves, as a
        # config naming the exporter's Prometheus with capacity windows run does
        expected_with=(RAY_GPU_CURVE, DCGM_USED),
        expected_if=asked_node_curves,
    ),
    EvidenceJudge(
        "capacity.answers_under_load",
        (ANSWERS_CHECK,),
        ANSWERS_EVIDENCE,
        lambda r, s: judge_answers(r, s.profile.capacity.answers_under_load_critical),
        "capacity",
    ),
)

CLIENT_HEADROOM = EvidenceJudge(
    "golive.client_headroom",
    ("golive.client_headroom",),
    CAPACITY_WATCHDOG,
    lambda r, s: [judge_headroom(r)],
    "capacity",
    expected_with=(CAPACITY_STEPS, CAPACITY_SUSTAINED),  # every load window has its row
)

JUDGES: tuple[EvidenceJudge, ...] = (*PHASES, CLIENT_HEADROOM)


async def collect(ctx: CheckContext, plan: Plan) -> list[CheckResult]:
    """The four pressure phases under the memory and engine samplers; saved and judged."""
    return await run_capacity(ctx, plan)


def judge(evidence: BundleReader, saved: Saved) -> list[CheckResult]:
    """The capacity checks (and the client's headroom) again from their saved evidence."""
    return judged(JUDGES, evidence, saved)


__all__ = ["CLIENT_HEADROOM", "JUDGES", "PHASES", "Plan", "collect", "judge"]
