"""Which family judge owns each check id, what it reads, and which section always writes it.

One table, each family's rows (its `JUDGES`, `checks/family.py`) and the single-module
checks' rows here: `golive decide` runs every judge whose evidence is in the bundle, and
every judge its sections always write, whatever verdict.json lists. A check id owned here is
never taken as sealed: without its evidence it is `no_data`.
"""

from __future__ import annotations

from pathlib import Path

from golive.bundle.layout import LEDGER_SENT, STARTUP_LOG
from golive.checks import agent, cache, capacity, env, smoke
from golive.checks.family import EvidenceJudge, Saved
from golive.checks.identity import CHECK_ID as IDENTITY_CHECK
from golive.checks.identity import judge_identity
from golive.checks.ledger import CHECK_ID as LEDGER_CHECK
from golive.checks.ledger import judge_ledger
from golive.checks.model_profile import CHECK_ID as PROFILE_CHECK
from golive.checks.model_profile import judge_model_profile

# the checks judged outside any family package: each its own module
LEDGER = EvidenceJudge(
    "golive.ledger",
    (LEDGER_CHECK,),
    LEDGER_SENT,
    lambda r, s: [judge_ledger(r)],
    None,
    expected_with=("requests/",),  # every run that sends requests counts them
)
IDENTITY = EvidenceJudge(
    "target.identity",
    (IDENTITY_CHECK, PROFILE_CHECK),
    LEDGER_SENT,  # every section that sends chat requests counts them
    lambda r, s: [*judge_identity(r), *judge_model_profile(r, s.profile, s.config)],
    None,
)
SINGLE_MODULE_JUDGES = (LEDGER, IDENTITY)

# The order is the order verdict.json lists `judged_from_evidence` in.
EVIDENCE_JUDGES: tuple[EvidenceJudge, ...] = (
    *agent.JUDGES,
    *cache.JUDGES,
    *env.JUDGES,
    *capacity.PHASES,
    *smoke.JUDGES,
    LEDGER,
    capacity.CLIENT_HEADROOM,
    IDENTITY,
)

__all__ = [
    "EVIDENCE_JUDGES",
    "SINGLE_MODULE_JUDGES",
    "EvidenceJudge",
    "Saved",
    "owner_of",
    "sections_with_evidence",
]


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
