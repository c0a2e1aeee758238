"""The sign-off record ticks an item only from evidence, and says which evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from golive.operate.rollback import Signature
from golive.orchestration.signoff import ITEMS, build_signoff, render_signoff
from golive.profiles import load_profile
from golive.results import Outcome
from tests.helpers.verdicts import action, verdict
from tests.helpers.verdicts import check as _check

KIMI = load_profile("kimi-k3").chain
DATA = Path(__file__).parents[1] / "data"


def _states(record: dict[str, Any]) -> dict[int, str]:
    return {i["number"]: i["state"] for i in record["items"]}


def test_items_follow_their_checks_and_files() -> None:
    """Each sign-off item is ticked, failed or missing from its checks and saved files, one passed
    check never ticking the others."""
    held = verdict(
        "hold",
        (
            _check("environment.image", "pass", "environment/container.json"),
            _check("environment.host_driver", "fail"),
            _check("capacity.long_input", "pass", "requests/capacity-long_input.jsonl"),
            _check("cache.prefix_reuse", "no_data"),
            _check("agent.one_arg.required", "pass"),
            _check("agent.structured", "warn"),
        ),
        (action("environment.host_driver", "infra", "d", "r"),),
    )
    files = ["verdict.json", "environment/container.json", "requests/capacity-long_input.jsonl"]
    record = build_signoff(held, files, chain=KIMI)
    states = _states(record)
    assert len(ITEMS) == 17
    assert states[1] == "ticked"
    assert states[4] == "failed"
    assert states[8] == "missing"  # the long-input check passed but no memory curve was saved
    assert states[11] == "missing"  # no_data never ticks
    # one passed check never ticks an item for the others it names
    assert states[13] == "missing"
    assert "agent.one_arg.named (not in this bundle)" in record["items"][12]["why"]
    assert states[16] == "ticked"  # the one failed item has an owner
    assert states[17] == "missing"
    package = {p["item"]: p for p in record["evidence_package"]}
    assert package["Container image and digest"]["present"]
    assert not package["Startup logs"]["present"]
    assert not package["Test sample, concurrency, context settings, and reviewer name"]["present"]
    text = render_signoff(record)
    assert "- [x] 1." in text
    assert "- [ ] FAILED 4." in text
    assert "Not signed." in text


def test_unassigned_failures_and_signature() -> None:
    """A failure with no owner leaves item 16 failed; a signature ticks item 17 and names the
    reviewer."""
    held = verdict(
        "hold",
        (_check("agent.retry", "fail"),),
        (action("agent.retry", "unassigned", "unassigned", "unassigned"),),
    )
    signature = Signature(
        reviewer="Ana",
        signed_at="t",
        outcome=Outcome.HOLD,
        verdict_outcome=Outcome.HOLD,
        bundle_digest="sha256:x",
        override_reason=None,
    )
    record = build_signoff(held, ["config/effective.yaml"], signature)
    states = _states(record)
    assert states[15] == "failed"
    assert states[16] == "failed"
    assert "agent.retry" in record["items"][15]["why"]
    assert states[17] == "ticked"
    reviewer = record["evidence_package"][-1]
    assert reviewer["present"]
    assert "Signed **hold** by Ana" in render_signoff(record)


def test_an_item_needs_every_check_it_names() -> None:
    """Item 5 with startup.log passed and environment.driver_runtime at no_data: not ticked."""
    held = verdict(
        "hold",
        (
            _check("environment.driver_runtime", "no_data"),
            _check("startup.log", "pass", "environment/startup.log"),
        ),
    )
    record = build_signoff(held, ["environment/startup.log"])
    assert _states(record)[5] == "missing"
    assert "environment.driver_runtime (no data)" in record["items"][4]["why"]


def test_a_warned_item_is_watched_not_ticked() -> None:
    """An item with a warned check is watched with an owner, not ticked, until the check passes."""
    names = ("agent.one_arg.required", "agent.one_arg.named", "agent.structured")
    checks = [_check(n, "pass") for n in names]
    checks += [_check("agent.multi_turn", "warn"), _check("agent.nested.required", "pass")]
    record = build_signoff(verdict("observe-with-limits", tuple(checks)), [])
    assert _states(record)[13] == "watched"
    assert "agent.multi_turn" in record["items"][12]["why"]
    assert "- [ ] WATCHED 13." in render_signoff(record)
    checks[3] = _check("agent.multi_turn", "pass")
    assert _states(build_signoff(verdict("go-live", tuple(checks)), []))[13] == "ticked"


def test_a_requirement_the_profile_does_not_make_is_never_ticked() -> None:
    """The checklist's items for the Kimi K3 image, CUDA 13 and R580 hosts: under the generic
    profile their checks passing (a CPU torch passes a CUDA check no profile requires) is no
    confirmation, so they read "not asserted by the generic profile"; under kimi-k3, whose
    checks hold the deployment to them, passing ticks them (issue 29 §1)."""
    names = ("environment.image", "environment.container_cuda", "environment.host_driver")
    passed = verdict(
        "go-live", tuple(_check(n, "pass", "environment/container.json") for n in names)
    )
    files = ["environment/container.json"]
    generic = build_signoff(passed, files, chain=load_profile("generic").chain)
    assert [_states(generic)[n] for n in (1, 3, 4)] == ["not-asserted"] * 3
    assert "not asserted by the generic profile" in generic["items"][2]["why"]
    assert "CUDA 13" in generic["items"][2]["why"]
    assert "- [ ] not asserted 3." in render_signoff(generic)
    assert [_states(build_signoff(passed, files))[n] for n in (1, 3, 4)] == ["not-asserted"] * 3
    kimi = build_signoff(passed, files, chain=KIMI)
    assert [_states(kimi)[n] for n in (1, 3, 4)] == ["ticked"] * 3


def test_another_pinned_image_is_not_the_kimi_k3_image() -> None:
    """A profile pinning another image by digest (the repo's two-H200 profile names the
    general vLLM image) does not assert the Kimi K3 image: item 1 reads "not asserted",
    however environment.image passed."""
    chain = load_profile(str(DATA / "profiles" / "h200x2-tp2.yaml")).chain
    assert chain.image is not None
    assert chain.image_digest_required
    passed = verdict(
        "go-live", (_check("environment.image", "pass", "environment/container.json"),)
    )
    signed = build_signoff(passed, ["environment/container.json"], chain=chain)
    assert _states(signed)[1] == "not-asserted"
    assert "Kimi K3 image with its digest" in signed["items"][0]["why"]
