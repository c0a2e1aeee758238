"""`capacity.slo`: the load windows held to the SLOs production states (issue 31 §1).

Each window's objectives are judged from its request records (`latency_set`,
`slo_objectives`: met or missed with 95% confidence, else unproven); the ramp's steps, its
knee repeats and the sustained window at its level speak for their concurrency together. The
SLO ceiling is the highest level shown to meet every SLO with none missed at or below it. A
level that missed one caps traffic at the ceiling; production's stated need above it is
capacity to buy only where the engine saturated there (`beyond_need`); the lowest level
missing one is no traffic limit at all (hold). Pure below `judge_slo`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_SLO,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    EFFECTIVE_CONFIG,
    MEMORY_CURVE,
)
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import cap_result, classified
from golive.checks.capacity.judge import stability_policy
from golive.checks.capacity.latency_set import WindowLatency, window_latency
from golive.checks.capacity.recorded import window_label, window_records
from golive.checks.capacity.rules import (
    Action,
    Classification,
    StabilityPolicy,
    StepStats,
    beyond_need,
    step_saturation,
)
from golive.checks.capacity.slo_objectives import Objective, State, objectives, rank, step_state
from golive.checks.context import CheckContext
from golive.config import GoliveConfig
from golive.results import CheckResult, Status
from golive.slo_config import SloConfig

CHECK = "capacity.slo"


@dataclass(frozen=True, slots=True)
class SloStep:
    """One load window held to the SLOs: a ramp step, or the sustained window at its level."""

    concurrency: int
    window: WindowLatency
    objectives: tuple[Objective, ...]
    saturated_by: str | None  # the engine's own evidence it ran out of room (the window's row)
    phase: str = "concurrency"

    @property
    def name(self) -> str:
        return self.window.label if self.phase == "concurrency" else self.phase

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.name,
            "concurrency": self.concurrency,
            "state": step_state(self.objectives).value,
            "goodput_rps": None
            if self.window.goodput is None
            else self.window.per_s(self.window.goodput),
            "objectives": [o.to_json() for o in self.objectives],
        }


@dataclass(frozen=True, slots=True)
class Level:
    """A concurrency's windows judged together: an objective missed in any window is missed
    at that level; else met where any window shows it; else unproven."""

    concurrency: int
    windows: tuple[SloStep, ...]

    def verdicts(self) -> list[tuple[str, State, str]]:
        """(objective, state, why) for each stated objective, across the level's windows."""
        out = []
        for name in dict.fromkeys(o.name for w in self.windows for o in w.objectives):
            found = [(w, o) for w in self.windows for o in w.objectives if o.name == name]
            state = max((o.state for _, o in found), key=rank)
            if state is State.UNPROVEN and any(o.state is State.MET for _, o in found):
                state = State.MET
            whys = [f"{w.name}: {o.why}" for w, o in found if o.state is state]
            out.append((name, state, "; ".join(whys)))
        return out

    @property
    def state(self) -> State:
        states = [state for _, state, _ in self.verdicts()]
        if State.MISSED in states:
            return State.MISSED
        return State.UNPROVEN if State.UNPROVEN in states else State.MET

    def said(self) -> str:
        return "; ".join(why for _, state, why in self.verdicts() if state is self.state)

    @property
    def saturated_by(self) -> str | None:
        return next((w.saturated_by for w in self.windows if w.saturated_by), None)


def levels(steps: Sequence[SloStep]) -> list[Level]:
    by_level: dict[int, list[SloStep]] = {}
    for step in steps:
        by_level.setdefault(step.concurrency, []).append(step)
    return [Level(c, tuple(found)) for c, found in sorted(by_level.items())]


def classify_slo(steps: Sequence[SloStep], required: int | None) -> Classification:
    """The SLO ceiling and what it means for the verdict. The ceiling is the highest level
    shown to meet every SLO with none missed at or below it; a level not shown to meet it or to
    miss it (too few answers) does not lower it where a higher one was shown (latency does not
    fall as load rises), and levels above the first that missed are not read."""
    found = levels(steps)
    if not found:
        return Classification(Action.NO_DATA, "no ramp step to hold to the SLOs")
    missed = next((level for level in found if level.state is State.MISSED), None)
    below = [lv for lv in found if missed is None or lv.concurrency < missed.concurrency]
    met = [lv.concurrency for lv in below if lv.state is State.MET]
    ceiling = max(met, default=None)
    unshown = [lv for lv in below if lv.state is State.UNPROVEN and lv.concurrency > (ceiling or 0)]
    if missed is not None:
        reason = f"concurrency {missed.concurrency} misses the SLO ({missed.said()})"
        if missed is found[0]:
            return Classification(
                Action.FIRST_STEP_FAILED,
                f"{reason}, the lowest load of the ramp: no traffic limit or number of "
                "replicas meets it; the serving configuration (parallelism, batching, "
                "speculative decoding) or faster GPUs must, or the SLO is not this "
                "deployment's",
            )
        if ceiling is None:
            return _unshown(unshown[0], f"; {reason}")
        limit = Classification(
            Action.LIMIT_TRAFFIC,
            f"SLO ceiling {ceiling}: every SLO met at concurrency {ceiling}; {reason}",
            ceiling=ceiling,
        )
        return beyond_need(limit, missed.saturated_by, required)
    if ceiling is None:
        return _unshown(unshown[0], "")
    if unshown and (required is None or ceiling < required):
        limit = Classification(
            Action.LIMIT_TRAFFIC,
            f"SLO ceiling {ceiling}: every SLO met at concurrency {ceiling}; concurrency "
            f"{unshown[0].concurrency} is not shown to meet the SLO or to miss it "
            f"({unshown[0].said()}); lengthen the steps (capacity.step_duration_s) to show more",
            ceiling=ceiling,
        )
        return beyond_need(limit, None, required)
    return Classification(
        Action.STABLE, f"every SLO met up to concurrency {ceiling} (SLO ceiling)", ceiling=ceiling
    )


def _unshown(level: Level, then: str) -> Classification:
    return Classification(
        Action.NO_DATA,
        f"concurrency {level.concurrency} is not shown to meet the SLO or to miss it "
        f"({level.said()}){then}: no level is shown to meet the SLOs; lengthen the steps "
        "(capacity.step_duration_s) for enough answers to bound their p95",
    )


def slo_steps(
    rows: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    slo: SloConfig,
    policy: StabilityPolicy,
    phase: str = "concurrency",
) -> list[SloStep]:
    """Each window's objectives from its records; its saturation from its row (held to its
    records and scrapes by the phase's own judge)."""
    out = []
    for row in rows:
        level = row.get("concurrency")
        if not isinstance(level, int) or isinstance(level, bool):
            continue
        label = window_label(row)
        window = window_latency(label, level, window_records(records, label), slo)
        saturated_by = step_saturation(StepStats.from_json(row), policy)
        out.append(SloStep(level, window, tuple(objectives(window, slo)), saturated_by, phase))
    return out


PATHS: tuple[str, ...] = (CAPACITY_CONCURRENCY_REQUESTS, CAPACITY_STEPS)


def judge_slo(
    evidence: BundleReader, config: GoliveConfig, ramp: CheckResult, sustained: CheckResult | None
) -> CheckResult:
    """`capacity.slo` from the bundle: the ramp's windows (its steps and knee repeats) and the
    sustained window held to the SLOs, from their records. A phase whose summary its records
    contradict (`ramp`, `sustained`: its own judge's finding) is not judged again here."""
    steps = slo_windows(evidence, config, ramp, sustained)
    if isinstance(steps, CheckResult):
        return steps
    paths = PATHS
    if any(s.phase == "sustained" for s in steps):
        paths = (*PATHS, CAPACITY_SUSTAINED_REQUESTS, CAPACITY_SUSTAINED)
    return slo_result(steps, config.slo, config.capacity.required_concurrency, paths)


def slo_windows(
    evidence: BundleReader, config: GoliveConfig, ramp: CheckResult, sustained: CheckResult | None
) -> list[SloStep] | CheckResult:
    """Every window held to the SLOs, or the check saying why none can be."""
    rows = evidence.jsonl(CAPACITY_STEPS)
    if "record_mismatches" in ramp.measurements or not rows:
        why = ramp.summary[:300] if rows else f"no ramp steps ({CAPACITY_STEPS})"
        return cap_result(CHECK, Status.NO_DATA, f"the SLOs cannot be judged: {why}", {}, PATHS)
    policy = stability_policy(config.capacity)
    records = evidence.jsonl(CAPACITY_CONCURRENCY_REQUESTS)
    windows = [*rows, *evidence.jsonl(CAPACITY_KNEE_REPEATS)]
    steps = slo_steps(windows, records, config.slo, policy)
    row = evidence.json(CAPACITY_SUSTAINED)
    if isinstance(row, Mapping) and sustained is not None:
        if "record_mismatches" in sustained.measurements:
            why = f"the sustained window: {sustained.summary[:300]}"
            return cap_result(CHECK, Status.NO_DATA, f"the SLOs cannot be judged: {why}", {}, PATHS)
        held = evidence.jsonl(CAPACITY_SUSTAINED_REQUESTS)
        steps += slo_steps([row], held, config.slo, policy, "sustained")
    return steps


def slo_result(
    steps: Sequence[SloStep], slo: SloConfig, required: int | None, paths: Sequence[str] = PATHS
) -> CheckResult:
    """The check with each window's objectives and goodput as its measurements
    (`<window>_<slo>`, `<window>_<slo>_state`, `<window>_goodput_rps`: the JUnit cases read
    them; a window is `c<N>`, `c<N>r<k>` or `sustained`)."""
    result = classify_slo(steps, required)
    stated = {k: v for k, v in slo.model_dump().items() if v is not None}
    measurements: dict[str, Any] = {
        "slo_ceiling": result.ceiling if result.action is not Action.NO_DATA else None,
        "slo_targets": ", ".join(f"{k}={v:g}" for k, v in stated.items()),
    }
    for step in steps:
        name = step.name
        measurements[f"{name}_duration_s"] = round(step.window.duration_s, 3)
        goodput = step.window.goodput
        measurements[f"{name}_goodput_rps"] = (
            None if goodput is None else step.window.per_s(goodput)
        )
        for found in step.objectives:
            measured = found.measured
            measurements[f"{name}_{found.name}"] = None if measured is None else round(measured, 4)
            measurements[f"{name}_{found.name}_state"] = found.state.value
            measurements[f"{name}_{found.name}_samples"] = found.samples
    return classified(CHECK, result, measurements, paths)


def asked_slo(root: Path) -> bool:
    """The bundle's saved config states an SLO and its capacity windows ran: the ramp was
    held to it, whatever files are left."""
    if not (root / MEMORY_CURVE).is_file():
        return False
    try:
        saved = yaml.safe_load((root / EFFECTIVE_CONFIG).read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return False  # an unreadable config is named by the judging of the config itself
    slo = saved.get("slo") if isinstance(saved, Mapping) else None
    return isinstance(slo, Mapping) and any(v is not None for v in slo.values())


def slo_of(ctx: CheckContext, results: Sequence[CheckResult]) -> CheckResult:
    """`capacity.slo` in a run, once the phases judged their windows (`results`)."""
    found = {r.id: r for r in results}
    ramp = found.get("capacity.concurrency")
    if ramp is None:
        return cap_result(CHECK, Status.NO_DATA, "the SLOs cannot be judged: no ramp ran", {}, ())
    sustained = found.get("capacity.sustained")
    reader = BundleReader(ctx.bundle.root)
    steps = slo_windows(reader, ctx.config, ramp, sustained)
    if not isinstance(steps, CheckResult):  # what each window was held to, for a reader
        ctx.bundle.write_json(CAPACITY_SLO, [s.to_json() for s in steps])
    return judge_slo(reader, ctx.config, ramp, sustained)
