"""`target.profile`: a deployment serving Kimi K3 is judged as one (issue 29 §1).

The generic profile asserts no image, CUDA, driver, parser or GPU count; under it a Kimi K3
deployment could pass with a CUDA 12 build, an R575 host, the hermes parser and one GPU. So
golive recognises Kimi K3 from the served model — the `/v1/models` id and root the run saved
(behind a gateway, the engine's own answer too), and the startup log's architecture, model
path and served names — and holds a verdict
judged under any profile that does not assert the Kimi K3 recipe, unless the run was given
`--not-k3 "REASON"` (config `not_k3`, recorded in the bundle and the report).

Only a deployment recognised as Kimi K3 gets this check: for any other model it says
nothing, so bundles of other models judge as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from golive.bundle.store import BundleReader, record_streams, stream_records
from golive.checks.context import served_entry
from golive.checks.deployment import deployment_of
from golive.checks.engine_name import ENGINE_IDENTITY, engine_model
from golive.checks.env.judge import serving_launch
from golive.config import GoliveConfig
from golive.evidence.image_ref import split_image
from golive.profiles import ChainExpectation, Profile, load_profile
from golive.results import INTEGRITY_RESULT, CheckResult, Status

CHECK_ID = "target.profile"
K3_PROFILE = "kimi-k3"
# "Kimi-K3", "moonshotai/Kimi-K3-NVFP4", "kimi_k3"; not "Kimi-K30", "kimi-k3b", "Kimi-K3.5",
# "eskimi-k3" nor "Kimi-Linear"
_K3_NAME = re.compile(r"(?<![a-z0-9])kimi[-_. ]?k3(?![a-z0-9]|\.[0-9])", re.IGNORECASE)
_K3_ARCHITECTURE = re.compile(r"^kimik3(?![0-9])", re.IGNORECASE)  # KimiK3ForCausalLM, ...


@dataclass(frozen=True, slots=True)
class Sign:
    """One place the evidence names the model: where, and what it says."""

    where: str
    value: str

    def __str__(self) -> str:
        return f"{self.where} {self.value!r}"


def kimi_k3_signs(signs: Iterable[Sign]) -> list[Sign]:
    """The signs that say Kimi K3 (architecture by its class name, the rest by model name)."""
    out = []
    for sign in signs:
        pattern = _K3_ARCHITECTURE if sign.where.endswith("architecture") else _K3_NAME
        if pattern.search(sign.value):
            out.append(sign)
    return out


def weaker_than_k3(profile: Profile, recipe: Profile) -> list[str]:
    """What `profile` asserts less strictly than the bundled kimi-k3 profile (empty: it asserts
    at least the recipe's chain)."""
    mine, theirs = profile.chain, recipe.chain
    out = [
        f"chain.{name}: {getattr(mine, name)!r}, the recipe's {getattr(theirs, name)!r}"
        for name in ("tool_parser", "reasoning_parser")
        if getattr(theirs, name) is not None and getattr(mine, name) != getattr(theirs, name)
    ]
    # the image as environment.image compares it: name and tag (a pinned digest is stricter)
    if theirs.image is not None and (
        mine.image is None or split_image(mine.image)[:2] != split_image(theirs.image)[:2]
    ):
        out.append(f"chain.image: {mine.image!r}, the recipe's {theirs.image!r}")
    for name in ("image_digest_required", "prefix_caching_required"):
        if getattr(theirs, name) and not getattr(mine, name):
            out.append(f"chain.{name} is off, the recipe's is on")
    for name in ("cuda_major", "min_driver_major", "min_gpus"):
        floor, given = getattr(theirs, name), getattr(mine, name)
        if floor is not None and (given is None or given < floor):
            out.append(f"chain.{name}: {given!r}, the recipe's {floor}")
    if not _at_least(mine, theirs.min_vllm):
        out.append(f"chain.min_vllm: {mine.min_vllm!r}, the recipe's {theirs.min_vllm}")
    strict = profile.capacity.answers_under_load_critical
    if recipe.capacity.answers_under_load_critical and not strict:
        out.append("capacity.answers_under_load_critical is off, the recipe's is on")
    missing = set(recipe.agent.critical_cases) - set(profile.agent.critical_cases)
    if missing:
        out.append(f"agent.critical_cases lacks {', '.join(sorted(missing))}")
    markers = set(recipe.agent.forbidden_content_markers)
    if not markers <= set(profile.agent.forbidden_content_markers):
        out.append("agent.forbidden_content_markers lacks the recipe's markers")
    if profile.cache.min_shared_prefix_tokens < recipe.cache.min_shared_prefix_tokens:
        out.append(
            f"cache.min_shared_prefix_tokens: {profile.cache.min_shared_prefix_tokens}, the "
            f"recipe's {recipe.cache.min_shared_prefix_tokens}"
        )
    return out


def _at_least(chain: ChainExpectation, floor: str | None) -> bool:
    if floor is None:
        return True
    if chain.min_vllm is None:
        return False
    try:
        return Version(chain.min_vllm).release >= Version(floor).release
    except InvalidVersion:
        return False


def model_signs(evidence: BundleReader, config: GoliveConfig) -> list[Sign]:
    """Where the bundle names the served model: `/v1/models` (id, root) and the startup log
    of the serving launch (architecture, model, served names)."""
    seen = deployment_of(evidence, config.target.model)
    signs = [
        Sign(where, value)
        for where, value in (("/v1/models id", seen.model), ("/v1/models root", seen.model_root))
        if value
    ]
    signs += [Sign("/v1/models parent", p) for p in sorted(_parents(evidence, config))]
    signs += _engine_signs(evidence, seen.model)
    launch = serving_launch(evidence)
    if launch is not None:
        if launch.architecture:
            signs.append(Sign("startup log architecture", launch.architecture))
        model = launch.arg("model") or launch.model
        if model:
            signs.append(Sign("startup log model", str(model)))
        signs += [Sign("startup log served name", n) for n in launch.served_names()]
    return signs


def _engine_signs(evidence: BundleReader, served: str | None) -> list[Sign]:
    """Behind a gateway (`--engine-url`), what the engine's own `/v1/models` says of the
    model the gateway serves (`requests/engine-identity.jsonl`): a gateway may alias the
    name and hide the path the engine loaded."""
    name = engine_model(evidence, served)
    for line in evidence.records(f"requests/{ENGINE_IDENTITY}.jsonl"):
        body = line.response
        if not line.url.endswith("/v1/models") or not isinstance(body, dict):
            continue
        entry, _ = served_entry(body, name)
        return [
            Sign(f"engine /v1/models {key}", entry[key])
            for key in ("id", "root", "parent")
            if entry is not None and isinstance(entry.get(key), str) and entry[key]
        ]
    return []


def _parents(evidence: BundleReader, config: GoliveConfig) -> set[str]:
    """The base model a served LoRA adapter names (`parent` in its /v1/models entry)."""
    out: set[str] = set()
    for path in record_streams(evidence.root):
        for record in stream_records(evidence.root, path):
            if not record.url.endswith("/v1/models"):
                continue
            entry, _ = served_entry(record.response, config.target.model)
            if entry is not None and isinstance(entry.get("parent"), str):
                out.add(entry["parent"])
    return out


def judge_model_profile(
    evidence: BundleReader, profile: Profile, config: GoliveConfig
) -> list[CheckResult]:
    """One result where the served model is Kimi K3, else none; behind a gateway, also one
    where the engine's own answer is not in the bundle (which model the engine serves is
    then unknown: the gateway may hide it)."""
    found = kimi_k3_signs(model_signs(evidence, config))
    if found:
        return [model_profile_result(found, profile, config.not_k3)]
    if config.target.engine_url is not None and not _engine_answered(evidence):
        return [
            INTEGRITY_RESULT(
                CHECK_ID,
                Status.NO_DATA,
                f"behind the gateway, the engine's own /v1/models answer is not in the bundle "
                f"(requests/{ENGINE_IDENTITY}.jsonl): which model the engine serves, and so "
                "whether it is Kimi K3, is unknown",
                evidence=(f"requests/{ENGINE_IDENTITY}.jsonl",),
            )
        ]
    return []


def _engine_answered(evidence: BundleReader) -> bool:
    """The engine's `/v1/models` answered (2xx, a model list) in the saved engine identity."""
    return any(
        line.url.endswith("/v1/models")
        and line.failure is None
        and line.http_status is not None
        and line.http_status // 100 == 2
        and isinstance(line.response, dict)
        for line in evidence.records(f"requests/{ENGINE_IDENTITY}.jsonl")
    )


def model_profile_result(found: list[Sign], profile: Profile, not_k3: str | None) -> CheckResult:
    """The verdict on judging a Kimi K3 deployment under `profile` (pure)."""
    shown = "; ".join(str(s) for s in found)
    gaps = weaker_than_k3(profile, load_profile(K3_PROFILE))
    measurements: dict[str, float | int | str | bool | None] = {
        "kimi_k3_signs": shown,
        "profile": profile.name,
        "profile_gaps": "; ".join(gaps) or None,
        "not_k3_reason": not_k3,
    }
    evidence = ("requests/", "environment/startup.log")

    def result(status: Status, summary: str) -> CheckResult:
        return INTEGRITY_RESULT(CHECK_ID, status, summary, measurements, evidence=evidence)

    if not gaps:
        return result(
            Status.PASS,
            f"this deployment serves Kimi K3 ({shown}) and was judged under the "
            f"{profile.name} profile, which asserts the recipe's chain",
        )
    if not_k3:
        return result(
            Status.PASS,
            f"the evidence names Kimi K3 ({shown}), but the run states it is not a Kimi K3 "
            f"deployment: --not-k3 {not_k3!r}; judged under the {profile.name} profile "
            "without the recipe's chain",
        )
    return result(
        Status.FAIL,
        f"this deployment serves Kimi K3 ({shown}) but was judged under the {profile.name} "
        f"profile, which asserts less than the recipe ({'; '.join(gaps[:3])}"
        f"{f' and {len(gaps) - 3} more' if len(gaps) > 3 else ''}): "
        f'run with --profile {K3_PROFILE}, or give --not-k3 "REASON" if it is not Kimi K3',
    )
