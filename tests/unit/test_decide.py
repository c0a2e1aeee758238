"""The decision table: go-live only from the whole programme with every check passed;
fail-closed everywhere else; the worst rule wins and every fired rule is kept."""

from __future__ import annotations

import dataclasses

import pytest

from golive.results import NOT_USED, CheckClass, CheckResult, Outcome, Status
from golive.verdict.decide import decide, limits
from golive.verdict.recorded import typed_measurements
from golive.verdict.scope import PROGRAMME, Scope, missing_parts

ENV, STARTUP, SMOKE = CheckClass.ENVIRONMENT, CheckClass.STARTUP, CheckClass.SMOKE
AGENT, CAPACITY, CACHE = CheckClass.AGENT, CheckClass.CAPACITY, CheckClass.CACHE


def _c(
    cid: str,
    status: Status = Status.PASS,
    critical: bool = True,
    cls: CheckClass = SMOKE,
    **measurements: str | int,
) -> CheckResult:
    """A check as verdict.json records it: `classification`, `skip_reason` and `limit_*` are
    read as the result's typed fields, as `golive decide` reads a bundle's."""
    typed = typed_measurements(measurements)
    return CheckResult(
        cid,
        cls,
        critical,
        status,
        f"{cid} {status}",
        typed.measurements,
        classification=typed.classification,
        limits=typed.limits,
        skip_reason=typed.skip_reason,
    )


# Every part of the programme, each passed: the only shape that may be go-live.
PROGRAMME_CHECKS = (
    _c("environment.vllm_version", cls=ENV),
    _c("environment.host_driver", cls=ENV),
    _c("startup.log", cls=STARTUP),
    _c("smoke.health"),
    _c("smoke.text"),
    _c("capacity.model_load", critical=False, cls=CAPACITY),
    _c("capacity.long_input", cls=CAPACITY),
    _c("capacity.concurrency", cls=CAPACITY, ceiling=8),
    _c("capacity.sustained", cls=CAPACITY),
    _c("cache.prefix_reuse", cls=CACHE),
    _c("agent.one_arg.required", cls=AGENT),
)


def programme(*changed: CheckResult, drop: tuple[str, ...] = ()) -> list[CheckResult]:
    """The passing programme with some checks replaced (same id) or added, some dropped."""
    by_id = {c.id: c for c in PROGRAMME_CHECKS if c.id not in drop}
    for check in changed:
        by_id[check.id] = check
    return list(by_id.values())


@pytest.mark.parametrize(
    ("checks", "scope", "outcome", "rules"),
    [
        pytest.param(programme(), PROGRAMME, Outcome.GO_LIVE, [], id="all-passed"),
        pytest.param([], PROGRAMME, Outcome.HOLD, ["nothing-measured"], id="nothing"),
        pytest.param(
            programme(_c("smoke.metrics", Status.NO_DATA)),
            PROGRAMME,
            Outcome.HOLD,
            ["missing-evidence"],
            id="critical-no-data",
        ),
        pytest.param(
            programme(_c("smoke.text", Status.ERROR)),
            PROGRAMME,
            Outcome.HOLD,
            ["missing-evidence"],
            id="critical-error",
        ),
        pytest.param(
            programme(_c("smoke.text", Status.FAIL)),
            PROGRAMME,
            Outcome.HOLD,
            ["critical-failure"],
            id="critical-fail",
        ),
        pytest.param(  # was go-live: a non-critical failure is never a silent pass
            programme(_c("smoke.shared_prompt", Status.FAIL, critical=False)),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["non-critical-unproven"],
            id="non-critical-fail",
        ),
        pytest.param(  # was go-live
            programme(_c("environment.image", Status.NO_DATA, critical=False, cls=ENV)),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["non-critical-unproven"],
            id="non-critical-no-data",
        ),
        pytest.param(  # was go-live: a warn is not a pass
            programme(_c("smoke.text", Status.WARN)),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["warnings-observed"],
            id="critical-warn",
        ),
        pytest.param(
            programme(_c("smoke.multimodal", Status.SKIPPED, False, skip_reason=NOT_USED)),
            PROGRAMME,
            Outcome.GO_LIVE,
            [],
            id="skipped-because-config-says-unused",
        ),
        pytest.param(
            programme(_c("smoke.multimodal", Status.SKIPPED, critical=False)),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["non-critical-unproven"],
            id="non-critical-skipped-without-reason",
        ),
        pytest.param(  # was go-live
            programme(_c("smoke.tools_structured", Status.SKIPPED)),
            PROGRAMME,
            Outcome.HOLD,
            ["missing-evidence"],
            id="critical-skipped",
        ),
        pytest.param(
            programme(_c("environment.host_driver", Status.FAIL, cls=ENV)),
            PROGRAMME,
            Outcome.REBUILD,
            ["environment-mismatch"],
            id="chain-fail",
        ),
        pytest.param(
            programme(
                _c("startup.log", Status.FAIL, cls=STARTUP),
                _c("smoke.text", Status.FAIL),
                _c("smoke.metrics", Status.NO_DATA),
            ),
            PROGRAMME,
            Outcome.REBUILD,
            ["missing-evidence", "environment-mismatch", "critical-failure"],
            id="all-rules-kept-worst-wins",
        ),
        pytest.param(  # startup OOM: correct the environment or topology
            programme(_c("capacity.model_load", Status.FAIL, cls=STARTUP)),
            PROGRAMME,
            Outcome.REBUILD,
            ["environment-mismatch"],
            id="startup-oom",
        ),
        pytest.param(  # sustained OOM after controlled limits, on a proven chain
            programme(
                _c(
                    "capacity.sustained",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                )
            ),
            PROGRAMME,
            Outcome.EXPAND_CAPACITY,
            ["capacity-exhausted"],
            id="sustained-oom",
        ),
        pytest.param(  # engine death + missing chain evidence: hold, not expand
            programme(
                _c(
                    "capacity.sustained",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                ),
                _c("environment.host_driver", Status.NO_DATA, cls=ENV),
            ),
            PROGRAMME,
            Outcome.HOLD,
            ["missing-evidence", "capacity-unattributed"],
            id="death-on-unproven-chain",
        ),
        pytest.param(  # HTTP 500 at concurrency 1: the lowest load failed, a defect that
            programme(  # holds (once: not also a critical failure), never expand-capacity
                _c(
                    "capacity.concurrency",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="first-step-failure",
                ),
            ),
            PROGRAMME,
            Outcome.HOLD,
            ["first-step-failure"],
            id="http-500-at-concurrency-1",
        ),
        pytest.param(  # a defect at the lowest load elsewhere: no capacity conclusion
            programme(
                _c(
                    "capacity.long_input",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="first-step-failure",
                ),
                _c(
                    "capacity.concurrency",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                    ceiling=2,
                ),
            ),
            PROGRAMME,
            Outcome.HOLD,
            ["first-step-failure", "capacity-unattributed"],
            id="expand-beside-a-first-step-failure",
        ),
        pytest.param(  # sustained says expand, but no ramp step was ever stable
            programme(
                _c(
                    "capacity.sustained",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                ),
                _c("capacity.concurrency", Status.NO_DATA, cls=CAPACITY),
            ),
            PROGRAMME,
            Outcome.HOLD,
            ["missing-evidence", "capacity-unattributed"],
            id="expand-without-a-stable-step",
        ),
        pytest.param(  # a refusal or a server that does not keep its own limits elsewhere
            programme(  # is a defect first: no capacity is concluded beside it
                _c(
                    "capacity.sustained",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="server-refused",
                ),
                _c(
                    "capacity.concurrency",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                    ceiling=2,
                ),
            ),
            PROGRAMME,
            Outcome.HOLD,
            ["capacity-unattributed", "critical-failure"],
            id="expand-beside-a-refusal",
        ),
        pytest.param(  # the long-input ladder's expand rests on the inputs it served: the
            programme(  # ramp's ceiling is not what it needs
                _c(
                    "capacity.long_input",
                    Status.FAIL,
                    cls=CAPACITY,
                    classification="expand-capacity",
                    limit_max_context=4096,
                ),
                _c("capacity.concurrency", Status.PASS, cls=CAPACITY, classification="stable"),
            ),
            PROGRAMME,
            Outcome.EXPAND_CAPACITY,
            ["capacity-exhausted"],
            id="context-expand-on-its-own-ladder",
        ),
        pytest.param(  # a capacity section alone has no chain: never expand-capacity
            [_c("capacity.sustained", Status.FAIL, cls=CAPACITY, classification="expand-capacity")],
            ("capacity",),
            Outcome.HOLD,
            ["capacity-unattributed", "section-only"],
            id="death-in-capacity-section",
        ),
        pytest.param(  # prefix-cache flag present, no measured reuse
            programme(_c("cache.prefix_reuse", Status.FAIL, cls=CACHE)),
            PROGRAMME,
            Outcome.HOLD,
            ["critical-failure"],
            id="cache-not-accepted",
        ),
        pytest.param(  # non-critical, bounded Agent defect
            programme(
                _c(
                    "agent.one_arg.auto",
                    Status.WARN,
                    False,
                    AGENT,
                    classification="limit-feature",
                    limit_disable_feature="tool_choice=auto",
                )
            ),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["agent-feature-limited"],
            id="bounded-agent-defect",
        ),
        pytest.param(  # repeated protocol or parser failure on a critical path
            programme(_c("agent.one_arg.required", Status.FAIL, cls=AGENT)),
            PROGRAMME,
            Outcome.HOLD,
            ["agent-protocol-failure"],
            id="critical-agent-failure",
        ),
        pytest.param(  # stable only under a lower ceiling
            programme(
                _c(
                    "capacity.concurrency",
                    Status.WARN,
                    cls=CAPACITY,
                    classification="limit-traffic",
                    limit_max_concurrency=2,
                )
            ),
            PROGRAMME,
            Outcome.OBSERVE_WITH_LIMITS,
            ["capacity-limited"],
            id="traffic-limit",
        ),
        pytest.param(  # a section that finds nothing wrong is not a decision
            [_c("smoke.health"), _c("smoke.text")],
            ("smoke",),
            Outcome.SECTION_PASSED,
            ["section-only"],
            id="section-passed",
        ),
        pytest.param(  # ... and one that finds a bounded problem says so
            [_c("smoke.health"), _c("smoke.text", Status.WARN)],
            ("smoke",),
            Outcome.OBSERVE_WITH_LIMITS,
            ["warnings-observed", "section-only"],
            id="section-with-finding",
        ),
        pytest.param(  # a programme bundle missing a part cannot decide
            programme(drop=("cache.prefix_reuse",)),
            PROGRAMME,
            Outcome.HOLD,
            ["programme-incomplete"],
            id="programme-without-cache",
        ),
        pytest.param(
            [
                *programme(drop=("agent.one_arg.required",)),
                _c("agent.programme", Status.SKIPPED, critical=False, cls=AGENT),
            ],
            PROGRAMME,
            Outcome.HOLD,
            ["non-critical-unproven", "programme-incomplete"],
            id="programme-agent-skipped",
        ),
    ],
)
def test_decision_table(
    checks: list[CheckResult], scope: Scope, outcome: Outcome, rules: list[str]
) -> None:
    """The decision table: each set of check results gives its outcome by the rules named."""
    decision = decide(checks, scope)
    assert decision.outcome is outcome
    assert [r.rule for r in decision.rules_fired] == rules


def test_a_waived_warn_is_named_and_does_not_hold_back_go_live() -> None:
    """A warn the policy waives by name is recorded and does not hold back go-live; an unwaived one
    still does."""
    checks = programme(_c("smoke.text", Status.WARN), _c("smoke.long_context", Status.WARN))
    decision = decide(checks, PROGRAMME, {"smoke.text": "..."})
    assert decision.waived == ("smoke.text",)
    assert decision.outcome is Outcome.OBSERVE_WITH_LIMITS  # the other warn is still watched
    assert decision.rules_fired[0].check_ids == ("smoke.long_context",)
    both = decide(checks, PROGRAMME, {"smoke.text": "...", "smoke.long_context": "..."})
    assert both.outcome is Outcome.GO_LIVE


def test_a_waiver_never_covers_a_failure() -> None:
    """A waiver never turns a failure into a pass."""
    decision = decide(programme(_c("smoke.text", Status.FAIL)), PROGRAMME, {"smoke.text": "x"})
    assert decision.outcome is Outcome.HOLD
    assert decision.waived == ()


def test_rules_cite_the_checks_behind_them() -> None:
    """A rule that fires cites every check behind it."""
    decision = decide(programme(_c("b", Status.FAIL), _c("c", Status.FAIL)))
    assert decision.rules_fired[0].check_ids == ("b", "c")


def test_missing_parts_name_each_part() -> None:
    """A programme missing parts names each part and the checks it lacks."""
    assert missing_parts(PROGRAMME_CHECKS) == []
    partial = [c for c in PROGRAMME_CHECKS if c.check_class in (SMOKE, CACHE)]
    partial = [*partial, dataclasses.replace(PROGRAMME_CHECKS[6])]  # capacity.long_input only
    assert missing_parts(partial) == [
        "env (version chain)",
        "capacity (capacity.model_load, capacity.concurrency, capacity.sustained)",
        "agent (the Agent contract)",
    ]


def test_exit_codes_are_distinct_and_go_live_is_zero() -> None:
    """Each outcome has its own exit code, go-live is 0 and 2 is left for usage errors."""
    codes = [o.exit_code for o in Outcome if o is not Outcome.SECTION_PASSED]
    assert Outcome.GO_LIVE.exit_code == 0
    assert Outcome.SECTION_PASSED.exit_code == 0  # nothing wrong found in the sections run
    assert len(set(codes)) == len(codes)
    assert 2 not in codes


def test_limits_collect_ceilings_and_features() -> None:
    """Limits take the lowest ceiling of each kind and every feature to disable."""
    checks = [
        _c("c", Status.WARN, cls=CAPACITY, limit_max_concurrency=4, limit_max_context=8192),
        _c("d", Status.WARN, cls=CAPACITY, limit_max_concurrency=2),
        _c("a", Status.WARN, False, AGENT, limit_disable_feature="tool_choice=auto"),
    ]
    assert limits(checks).to_json() == {
        "disable_features": ["tool_choice=auto"],
        "max_concurrency": 2,
        "max_context": 8192,
    }


@pytest.mark.parametrize(
    "headroom_id", ["golive.client_headroom", "golive.client_headroom@capacity"]
)
def test_a_run_whose_client_was_the_bottleneck_sets_no_concurrency_limit(headroom_id: str) -> None:
    """If golive could not keep up in any window, none of its windows measures the server: a
    drift or knee from that run is no concurrency limit (context acceptance still is one)."""
    checks = [
        _c("s", Status.WARN, cls=CAPACITY, limit_max_concurrency=1, limit_max_context=4096),
        _c(headroom_id, Status.FAIL, cls=CAPACITY),
    ]
    assert limits(checks).to_json() == {"max_context": 4096}
    assert limits(checks[:1]).to_json() == {"max_concurrency": 1, "max_context": 4096}
