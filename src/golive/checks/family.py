"""The shape every check family shares, and one row of the owner table.

Each `checks/<family>/` package exports the same four names from its `__init__`: `Plan` (what
its collector takes), `collect(ctx, plan)` (sends, saves the evidence, returns the checks),
`judge(evidence, saved)` (its checks again from the bundle alone) and `JUDGES` (its rows of
`checks/owners.EVIDENCE_JUDGES`: the ids it owns, the evidence file, the judge). A family
declares its rows here, below the owner table, so it never imports `owners`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from golive.bundle.store import ZSTD, BundleReader, locate
from golive.config import GoliveConfig
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


def judged(
    rows: Sequence[EvidenceJudge], evidence: BundleReader, saved: Saved
) -> list[CheckResult]:
    """A family's checks from the bundle alone: each of its rows whose evidence is there,
    judged in table order."""
    return [
        result
        for row in rows
        if row.present(evidence.root)
        for result in row.judge(evidence, saved)
    ]
