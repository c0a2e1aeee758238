"""What a bundle covers: the whole acceptance programme, or some of its sections.

Only a bundle that holds every part of the programme (version chain, request classes, the
four pressure phases, cache proof, Agent contract) can be `go-live` or observe-with-limits
that a reviewer may sign. A section command that finds nothing wrong is `section-passed`.
Pure: decided from the check ids in a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from golive.results import CheckClass, CheckResult, Status

PROGRAMME = "programme"
SECTIONS: tuple[str, ...] = ("env", "smoke", "capacity", "cache", "agent")
CAPACITY_PHASES: tuple[str, ...] = (
    "capacity.model_load",
    "capacity.long_input",
    "capacity.concurrency",
    "capacity.sustained",
)
# A skipped check that the config itself rules out (not a gap in the evidence).
NOT_USED = "not-used"

Scope = str | tuple[str, ...]


def scope_json(scope: Scope) -> str | list[str]:
    return scope if isinstance(scope, str) else list(scope)


def scope_from_json(value: object) -> Scope:
    """verdict.json `scope`; bundles written before the field existed were sections."""
    if value == PROGRAMME:
        return PROGRAMME
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


def _ran(check: CheckResult) -> bool:
    return check.status is not Status.SKIPPED or not check.id.endswith(".programme")


def missing_parts(checks: Sequence[CheckResult]) -> list[str]:
    """The programme's parts this list of results does not hold (empty: complete)."""
    present = {c.id for c in checks if _ran(c)}
    classes = {c.check_class for c in checks if _ran(c)}
    missing = []
    if not classes & {CheckClass.ENVIRONMENT, CheckClass.STARTUP}:
        missing.append("env (version chain)")
    if not any(i.startswith("smoke.") and i != "smoke.programme" for i in present):
        missing.append("smoke (request classes)")
    phases = [p for p in CAPACITY_PHASES if p not in present]
    if phases:
        missing.append(f"capacity ({', '.join(phases)})")
    if "cache.prefix_reuse" not in present:
        missing.append("cache (cache.prefix_reuse)")
    if not any(i.startswith("agent.") and i != "agent.programme" for i in present):
        missing.append("agent (the Agent contract)")
    return missing


def sections_missing(scope: Scope) -> list[str]:
    """The sections a section bundle still needs before a go-live decision."""
    if scope == PROGRAMME:
        return []
    return [s for s in SECTIONS if s not in scope]


def skipped_by_config(check: CheckResult) -> bool:
    """Skipped because the config says the class is not used (not evidence that is missing)."""
    return check.status is Status.SKIPPED and check.measurements.get("skip_reason") == NOT_USED
