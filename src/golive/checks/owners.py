"""Which family judge owns each check id, what it reads, and which section always writes it.

One literal table: `golive decide` runs every judge whose evidence is in the bundle, and
every judge its sections always write, whatever verdict.json lists. A check id owned here is
never taken as sealed: without its evidence it is `no_data`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from golive.bundle.layout import (
    AGENT_PLAN,
    CACHE_PROTOCOL,
    CAPACITY_LADDER,
    CAPACITY_SLO,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_WATCHDOG,
    CHAIN_INPUTS,
    DCGM_USED,
    K8S_PODS,
    LEDGER_SENT,
    MEMORY_CURVE,
    NODE_CURVES,
    RAY_GPU_CURVE,
    RAY_NODES,
    SMOKE_PLAN,
    STARTUP_LOG,
)
from golive.bundle.store import ZSTD, BundleReader, locate
from golive.checks.agent.judge import judge_agent
from golive.checks.cache import judge_cache
from golive.checks.capacity.answer_probes import CHECK as ANSWERS_CHECK
from golive.checks.capacity.answer_probes import EVIDENCE as ANSWERS_EVIDENCE
from golive.checks.capacity.answer_probes import judge_answers
from golive.checks.capacity.judge import (
    judge_headroom,
    judge_ramp,
    judge_sustained,
)
from golive.checks.capacity.long_input import judge_long_input
from golive.checks.capacity.memory import CHECK as MEMORY_CHECK
from golive.checks.capacity.memory import judge_memory
from golive.checks.capacity.model_load import judge_model_load
from golive.checks.capacity.node_curves import CHECK as GPU_MEMORY_CHECK
from golive.checks.capacity.node_curves import asked_node_curves, judge_gpu_memory
from golive.checks.capacity.slo import CHECK as SLO_CHECK
from golive.checks.capacity.slo import asked_slo, judge_slo
from golive.checks.coverage import CAPACITY as CAPACITY_COVERAGE
from golive.checks.coverage import SMOKE as SMOKE_COVERAGE
from golive.checks.coverage import with_sustained_coverage
from golive.checks.env.judge import CHAIN_CHECKS, judge_chain
from golive.checks.identity import CHECK_ID as IDENTITY_CHECK
from golive.checks.identity import judge_identity
from golive.checks.ledger import CHECK_ID as LEDGER_CHECK
from golive.checks.ledger import judge_ledger
from golive.checks.model_profile import CHECK_ID as PROFILE_CHECK
from golive.checks.model_profile import judge_model_profile
from golive.checks.smoke.judge import CHECKS as SMOKE_CHECKS
from golive.checks.smoke.judge import judge_smoke
from golive.checks.smoke.request_classes import SUSTAINED_STREAM as SMOKE_SUSTAINED
from golive.checks.smoke.request_classes import judge_sessions, judge_short_sustained
from golive.checks.smoke.request_classes_judge import CHECKS as CLASS_CHECKS
from golive.checks.smoke.request_classes_judge import FILE as CLASSES_FILE
from golive.checks.smoke.request_classes_judge import judge_saved_classes, judge_smoke_coverage
from golive.config import GoliveConfig
from golive.evidence.k8s_env import judge_pods
from golive.evidence.ray_env import judge_ray_nodes
from golive.profiles import Profile
from golive.results import CheckResult


@dataclass(frozen=True, slots=True)
class Saved:
    """What a judge reads besides the evidence: the profile and effective config the run
    applied (the bundle's own copies)."""

    profile: Profile
    config: GoliveConfig


@dataclass(frozen=True, slots=True)
class EvidenceJudge:
    """Checks judged from the bundle: which (ids; one ending in '.' is a whole family), the
    file their collector writes, the judge, the section whose collector runs it (None: any),
    and whether that section always writes `marker` when it runs (so a section bundle without
    it lost evidence)."""

    name: str
    checks: tuple[str, ...]
    marker: str
    judge: Callable[[BundleReader, Saved], list[CheckResult]]
    section: str | None
    always: bool = False
    # also expected (its evidence lost if absent) where one of these is in the bundle: a
    # folder ("requests/") counts when it holds a record file
    expected_with: tuple[str, ...] = ()
    # also expected where this says the run asked for it (the bundle's root)
    expected_if: Callable[[Path], bool] | None = None

    def owns(self, check_id: str) -> bool:
        if check_id.endswith(".programme"):  # a section's own result: why it did not run
            return False
        return any(
            check_id.startswith(c) if c.endswith(".") else check_id == c for c in self.checks
        )

    def present(self, root: Path) -> bool:
        """Its evidence file is in the bundle (plain or zstd)."""
        return locate(root, self.marker).is_file() or locate(root, self.marker + ZSTD).is_file()

    def expected_by(self, root: Path) -> bool:
        """Another file in the bundle (or what it asked for) says this judge's collector ran."""
        if self.expected_if is not None and self.expected_if(root):
            return True
        for rel in self.expected_with:
            if rel.endswith("/"):
                if any((root / rel).glob("*.jsonl*")):
                    return True
            elif locate(root, rel).is_file() or locate(root, rel + ZSTD).is_file():
                return True
        return False

    @property
    def placeholder_id(self) -> str:
        """The id a missing judge's `no_data` result takes when the bundle lists none of its
        checks."""
        first = self.checks[0]
        return first + "evidence" if first.endswith(".") else first


EVIDENCE_JUDGES = (
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
    EvidenceJudge(
        "cache",
        ("cache.",),
        CACHE_PROTOCOL,
        lambda r, s: judge_cache(r, s.profile, s.config.programme, s.config.cache),
        "cache",
        always=True,
    ),
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
    EvidenceJudge(
        "golive.ledger",
        (LEDGER_CHECK,),
        LEDGER_SENT,
        lambda r, s: [judge_ledger(r)],
        None,
        expected_with=("requests/",),  # every run that sends requests counts them
    ),
    EvidenceJudge(
        "golive.client_headroom",
        ("golive.client_headroom",),
        CAPACITY_WATCHDOG,
        lambda r, s: [judge_headroom(r)],
        "capacity",
        expected_with=(CAPACITY_STEPS, CAPACITY_SUSTAINED),  # every load window has its row
    ),
    EvidenceJudge(
        "target.identity",
        (IDENTITY_CHECK, PROFILE_CHECK),
        LEDGER_SENT,  # every section that sends chat requests counts them
        lambda r, s: [*judge_identity(r), *judge_model_profile(r, s.profile, s.config)],
        None,
    ),
)


def owner_of(check_id: str) -> EvidenceJudge | None:
    """The judge that owns `check_id`, or None (then the check may be taken as sealed)."""
    return next((j for j in EVIDENCE_JUDGES if j.owns(check_id)), None)


def sections_with_evidence(root: Path, always: bool = True) -> set[str]:
    """The sections whose always-written evidence is in the bundle (with `always=False`: any
    evidence only that section writes): they ran. The startup log proves no section: env,
    capacity and cache all keep it."""
    return {
        j.section
        for j in EVIDENCE_JUDGES
        if j.section and (j.always or not always) and j.marker != STARTUP_LOG and j.present(root)
    }
