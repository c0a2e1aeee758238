"""`golive run`: the whole acceptance programme in the checklist's order.

Compatibility first: the version chain is judged before any load is spent, and a `rebuild`
stops the programme there. Then the post-start request classes (a server that does not
answer stops the rest too), the prefix-cache proof, the pressure phases, the proof's warm
prefix probed again after their sustained window (kept or evicted by the load), and the
Agent contract. Every section that does not run leaves a `skipped` result saying why, and a
section that crashes leaves an `error` result while the others still run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from golive.checks import agent, cache, capacity, env, smoke
from golive.checks.context import CheckContext
from golive.results import CheckClass, CheckResult, Outcome, ResultsOf, Status
from golive.verdict.decide import decide

SECTIONS: tuple[tuple[str, CheckClass], ...] = (
    ("env", CheckClass.ENVIRONMENT),
    ("smoke", CheckClass.SMOKE),
    ("capacity", CheckClass.CAPACITY),
    ("cache", CheckClass.CACHE),
    ("agent", CheckClass.AGENT),
)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Each family's `Plan` for one programme run (smoke's is empty)."""

    evidence: env.Plan
    capacity: capacity.Plan
    cache: cache.Plan
    agent: agent.Plan


def section_result(section: str, status: Status, summary: str) -> CheckResult:
    return ResultsOf(dict(SECTIONS)[section])(
        f"{section}.programme", status, summary, critical=status is Status.ERROR
    )


async def run_programme(ctx: CheckContext, plan: RunPlan) -> list[CheckResult]:
    # (section, step, whether it is the section's first step: a skipped section says so once)
    steps: list[tuple[str, Callable[[], Awaitable[list[CheckResult]]], bool]] = [
        ("env", lambda: env.collect(ctx, plan.evidence), True),
        ("smoke", lambda: smoke.collect(ctx, smoke.Plan()), True),
        ("cache", lambda: cache.collect(ctx, plan.cache), True),
        ("capacity", lambda: capacity.collect(ctx, plan.capacity), True),
        ("cache", lambda: cache.probe_after_load(ctx), False),
        ("agent", lambda: agent.collect(ctx, plan.agent), True),
    ]
    checks: list[CheckResult] = []
    stop: str | None = None
    for section, step, first in steps:
        if stop is not None:
            if first:
                checks.append(section_result(section, Status.SKIPPED, stop))
            continue
        ctx.progress.phase(section if first else f"{section} (after the load)")
        try:
            found = await step()
        except Exception as exc:  # one broken section must not lose the others' evidence
            ctx.bundle.keep_traceback(section, exc)
            found = [
                section_result(
                    section,
                    Status.ERROR,
                    f"the {section} section stopped on an unexpected error: "
                    f"{type(exc).__name__}: {exc}",
                )
            ]
        checks += found
        stop = stop_reason(section, found)
    return checks


def stop_reason(section: str, found: list[CheckResult]) -> str | None:
    """Why the rest of the programme must not run, or None."""
    if section == "env" and decide(found).outcome is Outcome.REBUILD:
        failed = ", ".join(c.id for c in found if c.status is Status.FAIL and c.critical)
        return (
            f"not run: the version chain failed ({failed}), so the outcome is rebuild and "
            "no load is spent on an unsupported environment"
        )
    if section == "smoke":
        health = next((c for c in found if c.id == "smoke.health"), None)
        if health is None or health.status is not Status.PASS:
            return "not run: the server did not pass its health check, so load would prove nothing"
    return None
