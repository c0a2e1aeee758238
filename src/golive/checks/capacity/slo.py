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

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.bundle.layout import (
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_KNEE_REPEATS,
    CAPACITY_SLO,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
)
from golive.bundle.request_line import RequestRecordLine
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import classified
from golive.checks.capacity.judge import stability_policy
from golive.checks.capacity.latency_set import WindowLatency, pooled, window_latency
from golive.checks.capacity.node_curves import capacity_run_config
from golive.checks.capacity.recorded import by_window, window_label
from golive.checks.capacity.rules import (
    Action,
    Classification,
    StabilityPolicy,
    beyond_need,
    step_saturation,
)
from golive.checks.capacity.slo_objectives import Objective, State, objectives, step_state
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.window_evidence import rows_contradicted
from golive.checks.context import CheckContext
from golive.config import GoliveConfig
from golive.results import CAPACITY_RESULT, CheckResult, Status, measured_int, measured_number
from golive.slo_config import SloConfig

CHECK = "capacity.slo"
# capacity.slo's measurements, as other stages read them (`slo_ceiling`, `level_objectives`)
SLO_CEILING = "slo_ceiling"
SLO_TARGETS = "slo_targets"  # `name=value, …`, as the config states them
_DURATION, _STATE, _SAMPLES = "_duration_s", "_state", "_samples"  # after `c<N>`, `c<N>_<slo>`
_STATE_KEY = re.compile(rf"^(?P<level>c\d+)_(?P<objective>[a-z0-9_]+){_STATE}$")


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
    """A concurrency's windows (its ramp step, knee repeats, the sustained window there) as
    one sample, held to the SLOs: no window's luck speaks for the level alone."""

    concurrency: int
    windows: tuple[SloStep, ...]
    objectives: tuple[Objective, ...]

    @property
    def state(self) -> State:
        return step_state(self.objectives)

    @property
    def blocks(self) -> bool:
        """Missed, or not shown with a figure beyond the target (or none): no ceiling above
        it. A level not shown but measured within the target lets a higher, shown one stand
        (latency does not fall as load rises, and its own figures agree)."""
        return self.state is State.MISSED or any(
            o.state is State.UNPROVEN and not o.within for o in self.objectives
        )

    def said(self) -> str:
        shown = [o.why for o in self.objectives if o.state is self.state]
        windows = ", ".join(w.name for w in self.windows)
        return f"{windows}: {'; '.join(shown)}"

    @property
    def saturated_by(self) -> str | None:
        return next((w.saturated_by for w in self.windows if w.saturated_by), None)

    def pooled(self) -> WindowLatency:
        return pooled([w.window for w in self.windows], f"c{self.concurrency}")


def levels(steps: Sequence[SloStep], slo: SloConfig) -> list[Level]:
    by_level: dict[int, list[SloStep]] = {}
    for step in steps:
        by_level.setdefault(step.concurrency, []).append(step)
    out = []
    for concurrency, found in sorted(by_level.items()):
        window = pooled([w.window for w in found], f"c{concurrency}")
        # pooled to show a level met; a window that misses on its own still misses it (a
        # short window of a different regime is not averaged away by a long one)
        alone = {o.name: (w, o) for w in found for o in w.objectives if o.state is State.MISSED}
        judged = tuple(
            dataclasses.replace(
                alone[o.name][1], why=f"{alone[o.name][0].name} alone: {alone[o.name][1].why}"
            )
            if o.name in alone
            else o
            for o in objectives(window, slo)
        )
        out.append(Level(concurrency, tuple(found), judged))
    return out


def classify_slo(found: Sequence[Level], required: int | None) -> Classification:
    """The SLO ceiling and what it means for the verdict: the highest level shown to meet
    every SLO below the first level that blocks (`Level.blocks`); levels above that one are
    not read."""
    if not found:
        return Classification(Action.NO_DATA, "no ramp step to hold to the SLOs")
    stop = next((level for level in found if level.blocks), None)
    below = [lv for lv in found if stop is None or lv.concurrency < stop.concurrency]
    ceiling = max((lv.concurrency for lv in below if lv.state is State.MET), default=None)
    unshown = [lv for lv in below if lv.state is State.UNPROVEN and lv.concurrency > (ceiling or 0)]
    if stop is not None and stop.state is State.MISSED:
        reason = f"concurrency {stop.concurrency} misses the SLO ({stop.said()})"
        if stop is found[0]:
            return Classification(
                Action.FIRST_STEP_FAILED,
                f"{reason}, the lowest load of the ramp: no traffic limit or number of "
                "replicas meets it; the serving configuration (parallelism, batching, "
                "speculative decoding) or faster GPUs must, or the SLO is not this "
                "deployment's",
            )
        if ceiling is None:
            return _unshown((below or [stop])[0], f"; {reason}")
        limit = Classification(
            Action.LIMIT_TRAFFIC,
            f"SLO ceiling {ceiling}: every SLO met at concurrency {ceiling}; {reason}",
            ceiling=ceiling,
        )
        return beyond_need(limit, stop.saturated_by, required)
    if stop is not None:  # not shown, and its own figures do not say it is within
        unshown = [stop]
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
    records: Sequence[RequestRecordLine],
    slo: SloConfig,
    policy: StabilityPolicy,
    phase: str = "concurrency",
) -> list[SloStep]:
    """Each window's objectives from its records; its saturation from its row (held to its
    records and scrapes by the phase's own judge)."""
    out = []
    windows = by_window(records)
    for row in rows:
        level = row.get("concurrency")
        if not isinstance(level, int) or isinstance(level, bool):
            continue
        # a ramp step is its level's window, whatever label its row states (`steps_differences`
        # holds `c<N>` to its records); a knee repeat's label is held to its level there too
        label = (
            f"c{level}"
            if phase == "concurrency" and "r" not in str(row.get("label"))
            else (window_label(row))
        )
        window = window_latency(label, level, windows.get(label, []), slo)
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
    return steps if isinstance(steps, CheckResult) else _held(steps, config)


def _held(steps: Sequence[SloStep], config: GoliveConfig) -> CheckResult:
    """The check from the windows held to the SLOs, with the files they were read from."""
    paths = PATHS
    if any(s.phase == "sustained" for s in steps):
        paths = (*PATHS, CAPACITY_SUSTAINED_REQUESTS, CAPACITY_SUSTAINED)
    return slo_result(steps, config.slo, config.capacity.required_concurrency, paths)


def slo_windows(
    evidence: BundleReader, config: GoliveConfig, ramp: CheckResult, sustained: CheckResult | None
) -> list[SloStep] | CheckResult:
    """Every window held to the SLOs, or the check saying why none can be."""
    rows = evidence.jsonl(CAPACITY_STEPS)
    if _unjudged(ramp) or not rows:
        why = ramp.summary[:300] if rows else f"no ramp steps ({CAPACITY_STEPS})"
        return CAPACITY_RESULT(
            CHECK, Status.NO_DATA, f"the SLOs cannot be judged: {why}", evidence=PATHS
        )
    policy = stability_policy(config.capacity)
    records = evidence.records(CAPACITY_CONCURRENCY_REQUESTS)
    windows = [*rows, *evidence.jsonl(CAPACITY_KNEE_REPEATS)]
    steps = slo_steps(windows, records, config.slo, policy)
    row = evidence.json(CAPACITY_SUSTAINED)
    if isinstance(row, Mapping) and sustained is not None:
        if _unjudged(sustained):
            why = f"the sustained window: {sustained.summary[:300]}"
            return CAPACITY_RESULT(
                CHECK, Status.NO_DATA, f"the SLOs cannot be judged: {why}", evidence=PATHS
            )
        held = evidence.records(CAPACITY_SUSTAINED_REQUESTS)
        steps += slo_steps([row], held, config.slo, policy, "sustained")
    return steps


def _unjudged(phase: CheckResult) -> bool:
    """A phase whose summary its records contradict, or whose engine figures are not the
    engine's: nothing of its rows (its saturation) is read here."""
    return rows_contradicted(phase.measurements)


def slo_result(
    steps: Sequence[SloStep], slo: SloConfig, required: int | None, paths: Sequence[str] = PATHS
) -> CheckResult:
    """The check with each level's objectives (its windows pooled) and goodput as its
    measurements (`c<N>_<slo>`, `c<N>_<slo>_state`, `c<N>_goodput_rps`, `c<N>_windows`:
    the JUnit cases read them)."""
    found_levels = levels(steps, slo)
    result = classify_slo(found_levels, required)
    stated = {k: v for k, v in slo.model_dump().items() if v is not None}
    measurements: dict[str, Any] = {
        SLO_CEILING: result.ceiling if result.action is not Action.NO_DATA else None,
        SLO_TARGETS: ", ".join(f"{k}={v:g}" for k, v in stated.items()),
    }
    stop = next((level for level in found_levels if level.blocks), None)
    for level in found_levels:
        name, window = f"c{level.concurrency}", level.pooled()
        unread = stop is not None and level.concurrency > stop.concurrency
        measurements[f"{name}_windows"] = ", ".join(w.name for w in level.windows)
        measurements[f"{name}{_DURATION}"] = round(window.duration_s, 3)
        goodput = window.goodput
        measurements[f"{name}_goodput_rps"] = None if goodput is None else window.per_s(goodput)
        for found in level.objectives:
            measured = found.measured
            measurements[f"{name}_{found.name}"] = None if measured is None else round(measured, 4)
            # a level above the one that blocks is not read: its state says so
            measurements[f"{name}_{found.name}{_STATE}"] = (
                "not-read" if unread else found.state.value
            )
            measurements[f"{name}_{found.name}{_SAMPLES}"] = found.samples
    return classified(CHECK, result, measurements, paths)


def slo_ceiling(measurements: Mapping[str, object]) -> int | None:
    """The highest level shown to meet every SLO (None: none, or not judged)."""
    return measured_int(measurements.get(SLO_CEILING))


def slo_targets(measurements: Mapping[str, object]) -> str | None:
    """The SLOs the windows were held to, as stated (`ttft_p95_s=0.5, …`)."""
    value = measurements.get(SLO_TARGETS)
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class LevelObjective:
    """One SLO at one load level, as capacity.slo measured it (the level's windows pooled)."""

    level: str  # `c<N>`
    objective: str
    state: str  # the objective's `State`, or `not-read` above the level that blocked
    measured: float | None
    samples: int | None
    duration_s: float | None  # the level's windows together
    target: str | None  # as stated (None: not among the targets)


def level_objectives(measurements: Mapping[str, object]) -> list[LevelObjective]:
    """Each objective at each level, in the order `slo_result` wrote them."""
    stated = [p.partition("=") for p in (slo_targets(measurements) or "").split(", ")]
    out = []
    for key, state in measurements.items():
        found = _STATE_KEY.match(key)
        if found is None or not isinstance(state, str):
            continue
        level, slo = found["level"], found["objective"]
        out.append(
            LevelObjective(
                level,
                slo,
                state,
                measured_number(measurements.get(f"{level}_{slo}")),
                measured_int(measurements.get(f"{level}_{slo}{_SAMPLES}")),
                measured_number(measurements.get(f"{level}{_DURATION}")),
                next((value for name, _, value in stated if name == slo), None),
            )
        )
    return out


def asked_slo(root: Path) -> bool:
    """The bundle's saved config states an SLO and its capacity windows ran: the ramp was
    held to it, whatever files are left."""
    slo = capacity_run_config(root, "slo")
    return slo is not None and any(v is not None for v in slo.values())


def slo_of(ctx: CheckContext, results: Sequence[CheckResult]) -> CheckResult:
    """`capacity.slo` in a run, once the phases judged their windows (`results`)."""
    found = {r.id: r for r in results}
    ramp = found.get("capacity.concurrency")
    if ramp is None:
        return CAPACITY_RESULT(CHECK, Status.NO_DATA, "the SLOs cannot be judged: no ramp ran")
    sustained = found.get("capacity.sustained")
    reader = BundleReader(ctx.bundle.root)
    steps = slo_windows(reader, ctx.config, ramp, sustained)
    if isinstance(steps, CheckResult):
        return steps
    ctx.bundle.write_json(  # what each window was held to, for a reader
        CAPACITY_SLO,
        {
            "windows": [s.to_json() for s in steps],
            "levels": [
                {"concurrency": lv.concurrency, "state": lv.state.value}
                | {"objectives": [o.to_json() for o in lv.objectives]}
                for lv in levels(steps, ctx.config.slo)
            ],
        },
    )
    return _held(steps, ctx.config)  # the windows read once, as judge_slo reads them
