"""Programme completeness (checklist: a go-live decision needs every request class and every
Agent case the profile lists, each repeated enough to mean something).

Each family that can be cut short says what its evidence covers, in one `<family>.coverage`
check: `smoke.coverage` (the request classes ran), `agent.coverage` (every shipped case ran,
each at least `MIN_AGENT_REPEAT` times streamed and plain), `cache.coverage` (at least
`MIN_WARM_REPEATS` warm requests). A part the application does not use may be left out where
the config says so with an owner (`programme.not_used`). Counted from the bundle's records,
never from the config's word, so an edited plan or config cannot make a short run complete.
A gap is critical and `skipped` (skip_reason `left-out`, classified `programme-incomplete`): the
decision's rule of that name holds a programme on it (a section bundle only names it), never
as missing evidence. `golive decide` judges every bundle on it (a saved config without
`programme` takes today's default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from golive.checks.relaxations import AS_WRITTEN, Relaxations, profile_needs, relaxed_gaps
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig, RelaxedSetting, UnusedPart
from golive.results import CheckClass, CheckResult, Classification, ResultsOf, SkipReason, Status

MIN_AGENT_REPEAT = 3  # agent.repeat of a programme decision (runs per case and mode)
MIN_WARM_REPEATS = 2  # cache.warm_repeats of a programme decision
# the sustained window of a programme decision: 10 minutes and 30 answers (a window may be
# cut by its request cap after this share of its length, as every load window)
MIN_SUSTAINED_S = 600.0
MIN_SUSTAINED_COMPLETIONS = 30
SUSTAINED_COVERED_SHARE = 0.9
COVERAGE = ".coverage"
SMOKE = "smoke" + COVERAGE
AGENT = "agent" + COVERAGE
CACHE = "cache" + COVERAGE
CAPACITY = "capacity" + COVERAGE
CLASSES_PART = "smoke.classes"
GAPS = "gaps"  # a coverage check's measurement: what was left out (verdict/scope.py reads it)
GAP_SEPARATOR = " | "  # between the gaps in it
# The Agent cases golive shipped when the rule came: required of every bundle judged on it,
# whatever list a plan carries (a plan also records the cases shipped when it ran, which a
# later golive may have added to). A case removed from the shipped set must leave here too.
SHIPPED_CASES = (
    "one_arg.required",
    "one_arg.named",
    "one_arg.auto",
    "nested.required",
    "tool_result",
    "no_call",
    "incomplete_args",
    "invalid_args",
    "structured",
    "guided_json",
    "retry",
    "multi_turn",
)


def declared_unused(programme: ProgrammeConfig, part: str) -> UnusedPart | None:
    """The config's word that the application does not use `part` (with its owner)."""
    return next((u for u in programme.not_used if u.part == part), None)


def coverage_result(
    check_id: str,
    check_class: CheckClass,
    gaps: Sequence[str],
    covered: str,
    unused: Sequence[UnusedPart] = (),
    evidence: tuple[str, ...] = (),
    remedy: str = "run it, or list what the application does not use under "
    "programme.not_used with an owner",
    relaxed: Sequence[RelaxedSetting] = (),
) -> CheckResult:
    """Pass when nothing is missing (naming what the config says is not used, or weakened,
    and who said so); otherwise critical and `skipped` (a part of the programme did not run,
    which only the programme-incomplete rule judges), naming each gap and how to close it."""
    not_used = "".join(f"; {u.part} not used ({u.owner}: {u.reason})" for u in unused)
    weaker = "".join(f"; {r.setting} relaxed ({r.owner}: {r.reason})" for r in relaxed)
    said = not_used + weaker
    measurements: dict[str, str | None] = {"not_used": not_used.removeprefix("; ") or None}
    if relaxed:
        measurements["relaxed"] = weaker.removeprefix("; ")
    result = ResultsOf(check_class, evidence)
    if not gaps:
        return result(check_id, Status.PASS, covered + said, measurements)
    measurements[GAPS] = GAP_SEPARATOR.join(gaps)
    return result(
        check_id,
        Status.SKIPPED,
        "; ".join(gaps) + said + f". A go-live decision needs the whole programme: {remedy}",
        measurements,
        classification=Classification.PROGRAMME_INCOMPLETE,
        skip_reason=SkipReason.LEFT_OUT,
    )


def named_gaps(measurements: Mapping[str, object]) -> tuple[str, ...]:
    """The gaps a coverage check named (`coverage_result`); () where it named none."""
    named = measurements.get(GAPS)
    return tuple(named.split(GAP_SEPARATOR)) if isinstance(named, str) and named else ()


def smoke_coverage(
    programme: ProgrammeConfig, classes_ran: bool, configured: bool, evidence: str
) -> CheckResult:
    """`smoke.coverage`: the post-start request classes ran (their record stream is here), or
    the config says the application does not use them (and did not also ask for them: a
    config that ran the classes and a bundle without their records lost evidence)."""
    unused = declared_unused(programme, CLASSES_PART)
    gaps = []
    if not classes_ran and configured:
        gaps.append(
            f"the request classes were to run (smoke.classes: true) but {evidence} is not in "
            "the bundle"
        )
    elif not classes_ran and unused is None:
        gaps.append("the request classes did not run (smoke.classes: false)")
    covered = "the request classes ran" if classes_ran else "the request classes did not run"
    return coverage_result(
        SMOKE,
        CheckClass.SMOKE,
        gaps,
        covered,
        () if classes_ran or unused is None else (unused,),
        (evidence,) if classes_ran else (),
    )


def agent_coverage(
    programme: ProgrammeConfig,
    required: Sequence[str],
    repeats: Mapping[str, int],
    selected: Sequence[str] | None,
    critical: Sequence[str],
    evidence: str,
    relaxed: Relaxations = AS_WRITTEN,
) -> CheckResult:
    """`agent.coverage`: every `required` case ran (`repeats`: each planned case's runs in
    its less-run mode, streamed or plain), each at least `MIN_AGENT_REPEAT` times. A case
    left out needs the config's word that the application does not use it, and one the
    config selected (`agent.cases`; None: all) or the profile makes critical (the
    deployment's main path) cannot be left out at all."""
    gaps: list[str] = []
    unused: list[UnusedPart] = []
    left_out: list[str] = []
    for name in required:
        if name in repeats:
            continue
        said = declared_unused(programme, f"agent.{name}")
        if said is None:
            left_out.append(name)
        elif name in critical:
            gaps.append(f"agent.{name} is critical under the profile: it cannot be declared unused")
        elif selected is None or name in selected:
            gaps.append(f"agent.{name} was selected (agent.cases) but its run is not in the plan")
        else:
            unused.append(said)
    if left_out:
        gaps.append(f"Agent cases left out (agent.cases): {', '.join(left_out)}")
    short = {name: n for name, n in repeats.items() if n < MIN_AGENT_REPEAT}
    if short:
        each = ", ".join(f"{name} {n}" for name, n in sorted(short.items()))
        gaps.append(
            f"Agent cases run fewer than the {MIN_AGENT_REPEAT} times per mode a programme "
            f"decision needs (agent.repeat; a demo may run fewer, then its verdict is hold): "
            f"{each}"
        )
    if not repeats:
        gaps.append("no Agent case ran")
    gaps += relaxed.gaps
    least = min(repeats.values(), default=0)
    covered = f"{len(repeats)} Agent case(s) ran, each at least {least} time(s) per mode"
    return coverage_result(
        AGENT, CheckClass.AGENT, gaps, covered, unused, (evidence,), relaxed=relaxed.owned
    )


def sustained_coverage(
    sustained: CheckResult, relaxed: Relaxations = AS_WRITTEN
) -> CheckResult | None:
    """`capacity.coverage`: the sustained window a programme decision is made on held at
    least `MIN_SUSTAINED_S` and answered `MIN_SUSTAINED_COMPLETIONS`, as its own check
    measured them from the records — whatever floor the config set
    (`capacity.min_sustained_s` may be lowered for a quick look, never for a decision).
    None where the window did not run (capacity.sustained says why)."""
    # (here, not at the top: the capacity package imports this module)
    from golive.checks.capacity.measured import sustained_window

    window = sustained_window(sustained.measurements)
    held, answered = window.duration_s, window.completed
    if held is None or answered is None:
        return None
    gaps = []
    if held < MIN_SUSTAINED_S * SUSTAINED_COVERED_SHARE:
        gaps.append(
            f"a sustained window of {MIN_SUSTAINED_S:.0f} s, long enough to expose memory "
            f"growth and queue behaviour (it held {held:.0f} s: run with --duration "
            f"{MIN_SUSTAINED_S:.0f} and --min-sustained {MIN_SUSTAINED_S:.0f})"
        )
    if answered < MIN_SUSTAINED_COMPLETIONS:
        gaps.append(
            f"a sustained window of at least {MIN_SUSTAINED_COMPLETIONS} answers (it answered "
            f"{answered}: run longer)"
        )
    gaps += relaxed.gaps
    covered = f"the sustained window held {held:.0f} s and answered {answered} requests"
    return coverage_result(
        CAPACITY,
        CheckClass.CAPACITY,
        gaps,
        covered,
        (),
        sustained.evidence,
        remedy="hold the sustained window that long",
        relaxed=relaxed.owned,
    )


def with_sustained_coverage(
    sustained: CheckResult,
    programme: ProgrammeConfig | None,
    capacity: BaseModel,
    profile: Profile,
) -> list[CheckResult]:
    """capacity.sustained, and its coverage where the run is judged on completeness (a
    section run without a programme config is not), with the capacity rules `capacity` (the
    config's section) weakens: none the profile makes critical, whatever owner is named."""
    needs = profile_needs(profile)
    coverage = (
        None
        if programme is None
        else sustained_coverage(sustained, relaxed_gaps(programme, "capacity", capacity, needs))
    )
    return [sustained] if coverage is None else [sustained, coverage]


def cache_coverage(warm: int, evidence: str, relaxed: Relaxations = AS_WRITTEN) -> CheckResult:
    """`cache.coverage`: the prefix-cache proof sent at least `MIN_WARM_REPEATS` warm
    requests, under the cache rules as written (or weakened with an owner)."""
    gaps = list(relaxed.gaps)
    if warm < MIN_WARM_REPEATS:
        gaps.append(
            f"{warm} warm request(s) in the prefix-cache proof, fewer than the "
            f"{MIN_WARM_REPEATS} a programme decision needs (cache.warm_repeats)"
        )
    covered = f"{warm} warm requests in the prefix-cache proof"
    return coverage_result(
        CACHE,
        CheckClass.CACHE,
        gaps,
        covered,
        (),
        (evidence,),
        "close each gap as it says",
        relaxed.owned,
    )
