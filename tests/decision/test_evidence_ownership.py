"""Issue 27 §1: every owned check is judged by its family judge, whatever verdict.json lists.

A sceptical reviewer edits a bundle and re-seals it (the manifest is intact again): deletes a
family's evidence and drops it from the judged list, keeps only verdict.json and the policy,
edits a combined bundle's checks, changes the scope, or damages an evidence file. `golive
decide` must disagree and name what is missing, never re-derive a better outcome; signoff
and the rollback registry refuse what does not re-derive, and what golive cannot re-judge.
Bundles here come from the real CPU vLLM's recorded demo (tests/helpers/sections.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from golive.bundle.layout import (
    AGENT_PLAN,
    CAPACITY_CONCURRENCY_REQUESTS,
    CAPACITY_LADDER,
    CAPACITY_LONG_INPUT_REQUESTS,
    CAPACITY_STEPS,
    CAPACITY_SUSTAINED,
    CAPACITY_SUSTAINED_REQUESTS,
    MANIFEST,
    POLICY,
    SIGNOFF_JSON,
    VERDICT,
)
from golive.bundle.store import ZSTD, Bundle, read_lines
from golive.checks.owners import EVIDENCE_JUDGES, EvidenceJudge
from golive.cli.main import main
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.operate.rollback import Signature, register
from golive.orchestration.combine import combine
from golive.orchestration.rederive import Rederived, rederive, require_rederived
from golive.results import EXIT_USAGE, CheckLimits, Outcome, Status
from golive.verdict.decide import limits
from golive.verdict.policy import default_text, load_policy, parse_policy
from tests.helpers.sections import (
    all_sections,
    freeze_reuse_counters,
    pinned_image,
    programme_bundle,
    section_bundle,
)

pytestmark = pytest.mark.tampers_bundle


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One programme bundle of the demo's evidence, judged as golive run judges it."""
    root = tmp_path_factory.mktemp("programme") / "b"
    asyncio.run(programme_bundle(root, pinned_image))  # signable: a rollback can reach it
    assert rederive(root).agrees
    return root


def _copy(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "b"
    shutil.copytree(recorded, copy)
    return copy


def _edit_verdict(root: Path, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / VERDICT).read_text())
    data.update(changes)
    (root / VERDICT).write_text(json.dumps(data, indent=2))
    return data


def _all_pass(data: dict[str, Any], owned: EvidenceJudge | None = None) -> list[dict[str, Any]]:
    """verdict.json's checks with every one (or every one `owned` owns) a critical pass."""
    return [
        {**check, "status": "pass", "critical": True}
        if owned is None or owned.owns(check["id"])
        else check
        for check in data["checks"]
    ]


def _forged_go_live(root: Path, owned: EvidenceJudge | None = None) -> None:
    """What a reviewer who wants a go-live writes: checks passed, go-live, nothing fired."""
    data = json.loads((root / VERDICT).read_text())
    _edit_verdict(
        root,
        checks=_all_pass(data, owned),
        outcome="go-live",
        exit_code=0,
        rules_fired=[],
        actions=[],
        judged_from_evidence=[
            j for j in data["judged_from_evidence"] if owned is None or j != owned.name
        ],
    )
    Bundle(root).seal()


def _not_better(again: Rederived) -> None:
    assert not again.agrees
    assert again.decision.outcome.severity >= Outcome.HOLD.severity, again.decision.rules_fired
    assert again.as_sealed == ()


# the recorded demo read no Kubernetes pods, Ray nodes nor node GPU curves and stated no SLO:
# test_k8s.py, test_ray.py, test_dcgm_memory.py and the target tier's SLO test
# (tests/target/test_capacity.py) delete those families' evidence
NOT_RECORDED = ("environment.k8s", "environment.ray", "capacity.gpu_memory", "capacity.slo")
RECORDED_FAMILIES = [j for j in EVIDENCE_JUDGES if j.name not in NOT_RECORDED]


@pytest.mark.parametrize("owner", RECORDED_FAMILIES, ids=[j.name for j in RECORDED_FAMILIES])
def test_deleting_a_familys_evidence_and_listing_never_passes(
    recorded: Path, tmp_path: Path, owner: EvidenceJudge
) -> None:
    """Delete one judge's evidence file, drop it from judged_from_evidence, pass its checks,
    claim go-live and re-seal: decide disagrees, names the file, and holds."""
    root = _copy(recorded, tmp_path)
    for path in (root / owner.marker, root / (owner.marker + ZSTD)):
        path.unlink(missing_ok=True)
    _forged_go_live(root, owner)
    again = rederive(root)
    _not_better(again)
    assert any(owner.marker in p for p in again.problems), again.problems


def test_a_bundle_of_only_its_verdict_and_policy_holds(recorded: Path, tmp_path: Path) -> None:
    """verdict.json (forged to go-live) and the policy, nothing else: every family the
    programme always writes is named as missing and the decision is hold."""
    root = tmp_path / "b"
    (root / "config").mkdir(parents=True)
    shutil.copy(recorded / VERDICT, root / VERDICT)
    shutil.copy(recorded / POLICY, root / POLICY)
    _forged_go_live(root)
    again = rederive(root)
    _not_better(again)
    for owner in EVIDENCE_JUDGES:
        if owner.always:
            assert any(p.startswith(f"{owner.name}: ") for p in again.problems), owner.name


def test_a_narrowed_scope_is_named_and_not_used(recorded: Path, tmp_path: Path) -> None:
    """A programme bundle relabelled as the env section (so its failures would only be a
    section's): the command and the evidence say programme, and decide says so."""
    root = _copy(recorded, tmp_path)
    _edit_verdict(root, scope=["env"])
    Bundle(root).seal()
    again = rederive(root)
    assert again.scope == "programme"
    assert any("scope" in p for p in again.problems), again.problems
    assert again.decision.outcome is Outcome.OBSERVE_WITH_LIMITS


@pytest.mark.parametrize(
    ("rel", "damage"),
    [
        (CAPACITY_LADDER, '{"steps": [1, '),  # truncated JSON
        (CAPACITY_LADDER, "[]"),  # wrong type
        (CAPACITY_STEPS, '{"label": "c1"}\n'),  # a row without its fields
        (CAPACITY_STEPS, '{"completed": "many"}\n'),  # a field of the wrong type
        (CAPACITY_SUSTAINED, ""),  # empty
        ("metrics/cache-steps.jsonl", "\xff\xfe not text"),
        ("metrics/agent-plan.json", '{"cases": 7}'),
        ("environment/chain-inputs.json", '{"live": []}'),
    ],
)
def test_malformed_evidence_is_named_never_a_traceback(
    recorded: Path, tmp_path: Path, rel: str, damage: str
) -> None:
    """Damaged evidence (truncated, wrong type, empty, not UTF-8) makes decide name the file
    and hold; the CLI says so and exits 1, with no traceback."""
    root = _copy(recorded, tmp_path)
    (root / rel).write_bytes(damage.encode("utf-8", "surrogateescape"))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert again.decision.outcome.severity >= Outcome.HOLD.severity
    assert main(["decide", str(root)]) == 1


async def test_a_combined_bundle_is_judged_from_its_parts(tmp_path: Path) -> None:
    """A decide --combine result edited to all-pass go-live and re-sealed: its checks are
    rebuilt from the parts' evidence, so decide disagrees and keeps the parts' decision."""
    parts = await all_sections(tmp_path / "parts")
    combined = combine(parts, tmp_path / "combined", load_config(None, {}))
    assert combined.outcome is Outcome.OBSERVE_WITH_LIMITS
    root = tmp_path / "combined"
    _forged_go_live(root)
    again = rederive(root)
    assert not again.agrees
    assert again.decision.outcome is Outcome.OBSERVE_WITH_LIMITS
    assert any("differs from the sealed go-live" in p for p in again.problems)
    assert again.as_sealed == ()


async def test_signoff_and_the_registry_refuse_a_forged_bundle(
    recorded: Path, tmp_path: Path, capsys: Any
) -> None:
    """A re-sealed forgery (cache evidence deleted, go-live claimed) is refused by signoff,
    even with an override reason, and by the rollback registry; nothing is registered."""
    root = _copy(recorded, tmp_path)
    cache = next(j for j in EVIDENCE_JUDGES if j.name == "cache")
    (root / cache.marker).unlink()
    _forged_go_live(root, cache)
    registry = tmp_path / "registry"
    argv = ["signoff", str(root), "--reviewer", "Ana", "--outcome", "go-live"]
    reason = ["--override-reason", "trust me", "--registry", str(registry)]
    assert await asyncio.to_thread(main, [*argv, *reason]) == EXIT_USAGE
    assert "golive decide does not re-derive" in capsys.readouterr().err
    assert not registry.exists()
    signature = Signature("Ana", "t", Outcome.GO_LIVE, Outcome.GO_LIVE, "sha256:x", "x")
    with pytest.raises(ConfigError, match="does not re-derive"):
        register(root, signature, registry, require_rederived)


async def test_a_check_no_judge_owns_needs_an_override_to_be_accepted(
    recorded: Path, tmp_path: Path, capsys: Any
) -> None:
    """A check golive cannot re-judge from evidence (here one of a later golive's families)
    is taken on the bundle's word: decide says so, and signing the bundle accepted needs a
    reviewer's override reason, recorded with the signature. A GPU memory curve merged from
    node files is no longer such a check: claimed without the record of what the run read,
    it is missing evidence."""
    root = _copy(recorded, tmp_path)
    data = json.loads((root / VERDICT).read_text())
    extra = {
        "id": "capacity.gpu_memory",
        "class": "capacity",
        "critical": False,
        "status": "pass",
        "summary": "GPU memory curves from 2 node(s) merged by phase; peak 131000 MiB",
        "measurements": {},
        "evidence": [],
    }
    _edit_verdict(root, checks=[*data["checks"], extra])
    Bundle(root).seal()
    claimed = rederive(root)
    assert not claimed.agrees
    assert any("memory/node-curves.json is missing" in p for p in claimed.problems)
    unowned = {**extra, "id": "capacity.kv_offload", "summary": "offload tier checked"}
    _edit_verdict(root, checks=[*data["checks"], unowned])
    Bundle(root).seal()
    again = rederive(root)
    assert again.agrees, again.problems
    assert again.as_sealed == ("capacity.kv_offload",)
    with pytest.raises(ConfigError, match=r"bundle's own word.*capacity.kv_offload"):
        require_rederived(root, "watch --accepted")
    argv = ["signoff", str(root), "--reviewer", "Ana", "--outcome", "observe-with-limits"]
    assert await asyncio.to_thread(main, argv) == EXIT_USAGE
    assert "--override-reason" in capsys.readouterr().err
    reason = ["--override-reason", "the offload tier was read by the capacity owner"]
    assert await asyncio.to_thread(main, [*argv, *reason]) == 0
    signature = json.loads((root / SIGNOFF_JSON).read_text())["signature"]
    assert signature["taken_as_sealed"] == ["capacity.kv_offload"]


def test_signoff_without_its_record_is_a_named_error(
    recorded: Path, tmp_path: Path, capsys: Any
) -> None:
    """A bundle without signoff.json is refused naming the file (it was a traceback)."""
    root = _copy(recorded, tmp_path)
    (root / SIGNOFF_JSON).unlink()
    (root / MANIFEST).unlink()
    Bundle(root).seal()
    argv = ["signoff", str(root), "--reviewer", "Ana", "--outcome", "hold"]
    assert main(argv) == EXIT_USAGE
    assert f"{SIGNOFF_JSON}: cannot be read" in capsys.readouterr().err


def _keys(tmp_path: Path, name: str) -> tuple[Ed25519PrivateKey, Path]:
    key = Ed25519PrivateKey.generate()
    public = tmp_path / f"{name}.pub.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key, public


async def test_signoff_accepts_only_a_bundle_sealed_by_a_trusted_key(
    recorded: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --trust-key (or signoff.trusted_keys, from --config, $GOLIVE_CONFIG or
    GOLIVE_SIGNOFF_TRUSTED_KEYS), a bundle re-sealed without the run's key, or sealed by
    another key, is refused; the one sealed by the trusted key signs."""
    key, public = _keys(tmp_path, "run")
    other, _ = _keys(tmp_path, "other")
    signed = _copy(recorded, tmp_path / "signed")
    Bundle(signed).seal(key)  # as golive run --sign-key seals it
    argv = ["--reviewer", "Ana", "--outcome", "observe-with-limits", "--trust-key", str(public)]
    resealed = _copy(signed, tmp_path / "resealed")
    Bundle(resealed).seal()  # an edit re-sealed by someone without the key
    assert await asyncio.to_thread(main, ["signoff", str(resealed), *argv]) == EXIT_USAGE
    assert "not sealed by a trusted key" in capsys.readouterr().err
    stranger = _copy(signed, tmp_path / "stranger")
    Bundle(stranger).seal(other)
    config = tmp_path / "golive.yaml"
    config.write_text(f"signoff:\n  trusted_keys: [{public}]\n")
    by_config = ["--reviewer", "Ana", "--outcome", "observe-with-limits", "--config", str(config)]
    assert await asyncio.to_thread(main, ["signoff", str(stranger), *by_config]) == EXIT_USAGE
    assert "not by the key given" in capsys.readouterr().err
    # the trusted keys from the environment, as a run reads its config: never silently none
    by_env = ["--reviewer", "Ana", "--outcome", "observe-with-limits"]
    monkeypatch.setenv("GOLIVE_SIGNOFF_TRUSTED_KEYS", str(public))
    assert await asyncio.to_thread(main, ["signoff", str(resealed), *by_env]) == EXIT_USAGE
    monkeypatch.delenv("GOLIVE_SIGNOFF_TRUSTED_KEYS")
    monkeypatch.setenv("GOLIVE_CONFIG", str(config))
    assert await asyncio.to_thread(main, ["signoff", str(resealed), *by_env]) == EXIT_USAGE
    assert "not sealed by a trusted key" in capsys.readouterr().err
    monkeypatch.delenv("GOLIVE_CONFIG")
    assert await asyncio.to_thread(main, ["signoff", str(signed), *argv]) == 0


def test_a_policy_calling_itself_the_default_must_be_it(recorded: Path, tmp_path: Path) -> None:
    """A policy named like the bundled default but lenient is refused at the run, and a bundle
    carrying one is named by decide even with its digest recorded."""
    lenient = default_text().replace("critical: {}", "critical:\n  'cache.*': false", 1)
    assert lenient != default_text()
    path = tmp_path / "policy.yaml"
    path.write_text(lenient)
    with pytest.raises(ConfigError, match="calls itself 'golive-default'"):
        load_policy(path)
    root = _copy(recorded, tmp_path)
    (root / POLICY).write_text(lenient)
    data = json.loads((root / VERDICT).read_text())
    _edit_verdict(root, policy={**data["policy"], "sha256": parse_policy(lenient, "x").sha256})
    Bundle(root).seal()
    again = rederive(root)
    assert any("calls itself 'golive-default'" in p for p in again.problems), again.problems


def _rewrite_records(root: Path, rel: str, change: Any) -> int:
    """Every record line of `rel` (plain or zstd) passed through `change`, saved plain."""
    source = root / rel if (root / rel).is_file() else root / (rel + ZSTD)
    lines = [json.loads(line) for line in read_lines(source) if line.strip()]
    source.unlink()
    (root / rel).write_text("".join(json.dumps(change(r)) + "\n" for r in lines))
    return len(lines)


def _as_http_500(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "http_status": 500, "response": {"error": {"message": "EngineCore died"}}}


@pytest.mark.parametrize(
    ("rel", "check_id", "summary"),
    [
        (CAPACITY_CONCURRENCY_REQUESTS, "capacity.concurrency", "capacity-steps.jsonl line 1"),
        (CAPACITY_LONG_INPUT_REQUESTS, "capacity.long_input", "step long-128: accepted"),
        (CAPACITY_SUSTAINED_REQUESTS, "capacity.sustained", "completed"),
    ],
)
def test_request_records_rewritten_as_failures_are_not_hidden_by_the_summaries(
    recorded: Path, tmp_path: Path, rel: str, check_id: str, summary: str
) -> None:
    """Every ramp, long-input or sustained record rewritten as HTTP 500 under untouched step
    summaries: the summary no longer matches its records, so the check is no_data naming the
    file, and decide disagrees and holds."""
    root = _copy(recorded, tmp_path)
    assert _rewrite_records(root, rel, _as_http_500) > 0
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    check = next(c for c in again.checks if c.id == check_id)
    assert check.status is Status.NO_DATA
    assert "does not match the request records behind it" in check.summary
    assert summary in check.summary
    assert again.decision.outcome is Outcome.HOLD


def test_frozen_cache_counters_under_untouched_steps_are_caught(
    recorded: Path, tmp_path: Path
) -> None:
    """The engine's reuse counters frozen in every cache scrape while cache-steps.jsonl still
    claims reuse: the steps no longer match their scrapes, so the cache proof is no_data and
    decide disagrees and holds."""
    root = _copy(recorded, tmp_path)
    freeze_reuse_counters(root)
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    reuse = next(c for c in again.checks if c.id == "cache.prefix_reuse")
    assert reuse.status is Status.NO_DATA
    assert "does not match the scrapes and records behind it" in reuse.summary
    assert "d_hits" in reuse.summary
    assert again.decision.outcome is Outcome.HOLD


def test_a_frozen_exporter_during_the_ramp_is_not_the_engine(
    recorded: Path, tmp_path: Path
) -> None:
    """The c2 step's after-scrape carries the before-scrape's counters (an exporter that
    stopped moving): the ramp's engine figures are not the engine's, so capacity.concurrency
    is no_data and decide holds."""
    root = _copy(recorded, tmp_path)
    metrics = root / "metrics"
    shutil.copy(metrics / "capacity-c2-before.prom", metrics / "capacity-c2-after.prom")
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    ramp = next(c for c in again.checks if c.id == "capacity.concurrency")
    assert ramp.status is Status.NO_DATA
    assert "metrics frozen or from another engine: c2:" in ramp.summary
    assert again.decision.outcome is Outcome.HOLD


def _drop_checks(root: Path, *ids: str, add: tuple[dict[str, Any], ...] = ()) -> None:
    data = json.loads((root / VERDICT).read_text())
    kept = [c for c in data["checks"] if c["id"] not in ids]
    _edit_verdict(root, checks=[*kept, *add])


@pytest.mark.parametrize(
    ("deleted", "dropped", "named"),
    [
        # the request count goes, and with it the ledger and the answering-model checks
        ("metrics/ledger.json", ("golive.ledger", "target.identity"), "golive.ledger: "),
        # golive's own headroom in the load windows goes with its rows
        ("metrics/capacity-watchdog.jsonl", ("golive.client_headroom",), "client_headroom: "),
    ],
)
def test_a_deleted_file_and_its_checks_are_missed(
    recorded: Path, tmp_path: Path, deleted: str, dropped: tuple[str, ...], named: str
) -> None:
    """Delete a file whose judge is not tied to one section and drop its checks from
    verdict.json: the requests and load windows in the bundle say it was written, so decide
    names it and holds."""
    root = _copy(recorded, tmp_path)
    (root / deleted).unlink()
    _drop_checks(root, *dropped)
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert any(p.startswith(("golive.", named)) and deleted in p for p in again.problems)
    assert again.decision.outcome is Outcome.HOLD


def _check(check_id: str, status: str, critical: bool, **measurements: Any) -> dict[str, Any]:
    return {
        "id": check_id,
        "class": "integrity",
        "critical": critical,
        "status": status,
        "summary": "edited in",
        "measurements": measurements,
        "evidence": [],
    }


@pytest.mark.parametrize(
    ("added", "named"),
    [
        # a section result claiming the section was not used, over the smoke evidence deleted
        (
            _check("smoke.programme", "skipped", False, skip_reason="not-used"),
            "smoke.programme: a section is never skipped as not used",
        ),
        # golive's own crash record, made harmless, to silence the judges a section calls for
        (
            _check("golive.internal", "pass", False),
            "golive.internal: golive writes it only as a critical error",
        ),
    ],
)
def test_golives_own_records_cannot_silence_a_judge(
    recorded: Path, tmp_path: Path, added: dict[str, Any], named: str
) -> None:
    """The smoke evidence deleted and its checks dropped, with a section result or a crash
    record added to excuse it: decide names the added record and holds."""
    root = _copy(recorded, tmp_path)
    (root / "metrics/smoke-plan.json").unlink()
    smoke = next(j for j in EVIDENCE_JUDGES if j.name == "smoke")
    data = json.loads((root / VERDICT).read_text())
    _drop_checks(root, *(c["id"] for c in data["checks"] if smoke.owns(c["id"])), add=(added,))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert any(p.startswith(named) for p in again.problems), again.problems
    assert again.decision.outcome is Outcome.HOLD


def test_a_config_edited_after_the_run_is_named(recorded: Path, tmp_path: Path) -> None:
    """config/effective.yaml loosened after the run (a laxer latency-growth limit for the
    sustained window): it is not the config verdict.json's digest names."""
    root = _copy(recorded, tmp_path)
    config = root / "config/effective.yaml"
    text = config.read_text()
    assert "max_latency_growth: 0.2" in text
    config.write_text(text.replace("max_latency_growth: 0.2", "max_latency_growth: 5.0"))
    Bundle(root).seal()
    again = rederive(root)
    assert "config/effective.yaml is not the config verdict.json's config_digest names" in (
        again.problems
    )


def test_a_symbolic_link_in_a_bundle_is_named(recorded: Path, tmp_path: Path) -> None:
    """Evidence behind a symbolic link is outside what the manifest hashes: named."""
    root = _copy(recorded, tmp_path)
    outside = tmp_path / "outside"
    (root / "memory").rename(outside)
    (root / "memory").symlink_to(outside)
    Bundle(root).seal()
    again = rederive(root)
    assert any("symbolic links" in p for p in again.problems)


async def test_a_combined_bundle_is_one_deployment_when_judged_again(tmp_path: Path) -> None:
    """A combined bundle whose agent part is swapped afterwards for another deployment's (and
    re-sealed), or whose part points out of the bundle: decide names it, no crash."""
    parts = await all_sections(tmp_path / "parts")
    combine(parts, tmp_path / "combined", load_config(None, {}))
    other = await section_bundle(tmp_path / "other", "agent", settings={"target.model": "x"})
    root = tmp_path / "combined"
    shutil.rmtree(root / "parts/agent")
    shutil.copytree(other, root / "parts/agent")
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert any("parts/agent: its manifest is not the one" in p for p in again.problems)
    assert any("model" in p and "agent" in p for p in again.problems), again.problems
    data = json.loads((root / VERDICT).read_text())
    data["parts"][0]["dir"] = "."
    (root / VERDICT).write_text(json.dumps(data))
    Bundle(root).seal()
    looped = rederive(root)
    assert any("a part lives in parts/<name>" in p for p in looped.problems)


@pytest.mark.parametrize(
    ("key", "edit"),
    [
        ("vllm_version", lambda inputs: inputs["live"]["vllm_version"].update(value="0.99.0")),
        ("max_model_len", lambda inputs: inputs["live"]["max_model_len"].update(value="1000000")),
        ("cache_info", lambda inputs: inputs["cache_info"].update(enable_prefix_caching="False")),
    ],
    ids=["version", "max-model-len", "cache-config"],
)
def test_an_edited_copy_of_the_live_servers_answers_is_named(
    recorded: Path, tmp_path: Path, key: str, edit: Any
) -> None:
    """The version chain reads the live server's answers from chain-inputs.json; edited there
    (a version the profile wants, a longer context, another cache setting) they are no longer
    what the saved /version and /v1/models records and the env scrape say: decide names the
    file and holds, never judges the edited copy."""
    root = _copy(recorded, tmp_path)
    path = root / "environment/chain-inputs.json"
    inputs = json.loads(path.read_text())
    edit(inputs)
    path.write_text(json.dumps(inputs))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    assert any("chain-inputs.json" in p and key in p for p in again.problems), again.problems
    assert again.decision.outcome is Outcome.HOLD


@pytest.mark.parametrize(
    "forged",
    [
        {"classification": "expand-capacity"},
        {"classification": "limit-traffic", "limit_max_concurrency": 1, "limit_max_context": 7},
    ],
    ids=["expand-capacity", "limits"],
)
def test_a_check_with_no_evidence_carries_no_sealed_classification_or_limit(
    recorded: Path, tmp_path: Path, forged: dict[str, Any]
) -> None:
    """A sealed check its judge does not give (here a forged `agent.bogus`) is `no_data` with
    nothing the bundle said of it: its classification and limits never reach the decision,
    so no capacity rule fires and no limit is derived from it."""
    root = _copy(recorded, tmp_path)
    data = json.loads((root / VERDICT).read_text())
    bogus = {
        "id": "agent.bogus",
        "class": "agent",
        "critical": False,
        "status": "warn",
        "summary": "forged",
        "measurements": forged,
        "evidence": [],
    }
    _edit_verdict(root, checks=[*data["checks"], bogus])
    Bundle(root).seal()
    again = rederive(root)
    (check,) = [c for c in again.checks if c.id == "agent.bogus"]
    assert check.status is Status.NO_DATA
    assert check.classification is None
    assert check.limits == CheckLimits()
    rules = {r.rule for r in again.decision.rules_fired}
    assert not rules & {"capacity-unattributed", "capacity-exhausted", "capacity-limited"}
    assert limits(again.checks).max_concurrency is None
    _not_better(again)


def test_deleted_agent_plan_keeps_no_sealed_feature_limit(recorded: Path, tmp_path: Path) -> None:
    """An honest bundle whose Agent plan is deleted: the Agent checks are `no_data`, and the
    features the sealed verdict told to disable are not derived from checks with no data."""
    root = _copy(recorded, tmp_path)
    (root / AGENT_PLAN).unlink()
    Bundle(root).seal()
    again = rederive(root)
    agent = [c for c in again.checks if c.id.startswith("agent.")]
    assert agent
    assert all(c.limits == CheckLimits() for c in agent if c.status is Status.NO_DATA)
    assert "agent-feature-limited" not in {r.rule for r in again.decision.rules_fired}
    _not_better(again)
