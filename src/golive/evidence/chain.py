"""Pure rules of the version chain: image, vLLM build, container CUDA, host drivers, GPUs.

The checklist's gate: "the image, runtime, host driver, and startup path must describe one
coherent environment". A rule judges what it was given; a rule that needs evidence the
user did not give is `no_data` (critical where the profile makes it so), never `pass`.
Every result cites its evidence (bundle path, and line or field).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from golive.bundle.layout import CONTAINER, K8S_PODS, STARTUP_LOG
from golive.config import CustomBuild, ParallelConfig
from golive.evidence.facts import ContainerInfo, HostInfo
from golive.evidence.startup_log import StartupFacts
from golive.profiles import Profile
from golive.results import CheckClass, CheckResult, Status

_CUSTOM = re.compile(r"\.dev\d+|\+g[0-9a-f]{6,}|\+[0-9a-f]{7,}")


@dataclass(frozen=True, slots=True)
class Source:
    """A piece of evidence and where it lives in the bundle."""

    value: str
    where: str


@dataclass(frozen=True, slots=True)
class PodImage:
    """An engine pod's container: its spec image and the imageID its node resolved."""

    image: str | None
    image_id: str | None


@dataclass(frozen=True, slots=True)
class ChainInputs:
    profile: Profile
    live_version: Source | None = None
    live_max_model_len: Source | None = None
    live_model: Source | None = None  # the served model id from /v1/models
    image: Source | None = None
    startup: StartupFacts | None = None
    startup_path: str = STARTUP_LOG
    container: ContainerInfo | None = None
    container_path: str = CONTAINER
    # each node's serving container (multi-node: environment/container-<node>.json); None
    # where chain-inputs.json lists a file the bundle lacks
    node_containers: tuple[tuple[ContainerInfo | None, str], ...] = ()
    hosts: tuple[tuple[HostInfo, str], ...] = ()
    declared_parallel: ParallelConfig | None = None
    gpu_class: str | None = None  # declared by the config, else the profile
    gpu_total: int | None = None
    custom_build: CustomBuild | None = None
    cache_info: Mapping[str, str] = field(default_factory=dict)
    # each engine pod's image as the cluster says it runs it (environment/k8s-pods.json)
    pods: tuple[PodImage, ...] = ()
    pods_path: str = K8S_PODS


def env_result(
    check_id: str,
    critical: bool,
    status: Status,
    summary: str,
    measurements: Mapping[str, float | int | str | bool | None] | None = None,
    evidence: Sequence[str] = (),
    check_class: CheckClass = CheckClass.ENVIRONMENT,
) -> CheckResult:
    """A chain rule's result; startup rules pass their own class."""
    return CheckResult(
        check_id,
        check_class,
        critical,
        status,
        summary,
        dict(measurements or {}),
        tuple(evidence),
    )


DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """("vllm/vllm-openai", "kimi-k3", "sha256:...") from `name:tag@sha256:...` (what follows
    `@` as written: `DIGEST` says whether it is one)."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def same_repository(a: str, b: str) -> bool:
    """One repository, whatever registry it was pulled from (`docker.io/library/x` is `x`,
    `registry.corp:5000/vllm/vllm-openai` is `vllm/vllm-openai`); a mirror that renames the
    path (`quay.io/acme/vllm-openai`) is not shown to be the same."""
    left, right = _path(a), _path(b)
    return bool(left) and left == right


def _path(repository: str) -> str:
    parts = repository.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts and parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts)


def _official_image(inputs: ChainInputs) -> bool:
    """The image given is the profile's official one (name and tag): a dev version string in
    it is the nightly that image was built from, not a build of the user's own."""
    expected = inputs.profile.chain.image
    if expected is None or inputs.image is None:
        return False
    name, tag, _ = split_image(inputs.image.value)
    want_name, want_tag, _ = split_image(expected)
    return same_repository(name, want_name) and tag == want_tag


def _parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def check_vllm_version(inputs: ChainInputs) -> CheckResult:
    """Live API, startup log and container agree on one vLLM; at least the minimum; official."""
    sources: list[Source] = []
    if inputs.live_version is not None:
        sources.append(inputs.live_version)
    if inputs.startup is not None and inputs.startup.vllm_version:
        sources.append(
            Source(
                inputs.startup.vllm_version, f"{inputs.startup_path}#L{inputs.startup.version_line}"
            )
        )
    if inputs.container is not None and inputs.container.vllm_version:
        sources.append(
            Source(inputs.container.vllm_version, f"{inputs.container_path}#vllm_version")
        )
    where = [s.where for s in sources]
    if not sources:
        return env_result(
            "environment.vllm_version",
            True,
            Status.NO_DATA,
            "no vLLM version known: give --target, --log or --container-info",
        )
    versions = sorted({s.value for s in sources})
    measurements: dict[str, float | int | str | bool | None] = {"vllm_version": versions[0]}
    if len(versions) > 1:
        seen = ", ".join(f"{s.value} ({s.where})" for s in sources)
        return env_result(
            "environment.vllm_version",
            True,
            Status.FAIL,
            f"the layers disagree on the vLLM version: {seen}",
            measurements,
            where,
        )
    version = versions[0]
    minimum = inputs.profile.chain.min_vllm
    parsed = _parse_version(version)
    if minimum is not None and (parsed is None or parsed.release < Version(minimum).release):
        return env_result(
            "environment.vllm_version",
            True,
            Status.FAIL,
            f"vLLM {version} is older than the profile's minimum {minimum}",
            measurements,
            where,
        )
    nightly_in_official = _CUSTOM.search(version) is not None and _official_image(inputs)
    if nightly_in_official:  # e.g. the Kimi K3 image, built from a nightly: not a custom build
        measurements["nightly_build"] = True
    elif _CUSTOM.search(version):
        measurements["custom_build"] = True
        if inputs.profile.chain.image is not None:
            return env_result(
                "environment.vllm_version",
                True,
                Status.FAIL,
                f"vLLM {version} is a custom/dev build: it goes on a separate evidence track and "
                "never counts as the official recipe",
                measurements,
                where,
            )
        if inputs.custom_build is None:
            return env_result(
                "environment.vllm_version",
                True,
                Status.FAIL,
                f"vLLM {version} is a custom/dev build with no build record: give "
                "environment.custom_build (source branch, commit, lockfile, build command, "
                "image digest, rollback image)",
                measurements,
                where,
            )
        return env_result(
            "environment.vllm_version",
            True,
            Status.PASS,
            f"vLLM {version}: custom build on its own evidence track (commit "
            f"{inputs.custom_build.commit}, rollback {inputs.custom_build.rollback_image})",
            measurements,
            where,
        )
    floor = "" if minimum is None else f" (minimum {minimum})"
    if nightly_in_official:
        floor += f", the nightly the profile's image {inputs.profile.chain.image} is built from"
    measurements["sources"] = len(sources)
    if len(sources) < 2:
        return env_result(
            "environment.vllm_version",
            True,
            Status.WARN,
            f"vLLM {version}{floor} from one source only ({sources[0].where}): nothing "
            "corroborates it; give a second one (--target for the live /version, --log, "
            "--container-info)",
            measurements,
            where,
        )
    return env_result(
        "environment.vllm_version",
        True,
        Status.PASS,
        f"vLLM {version}{floor}, agreed by {len(sources)} source(s)",
        measurements,
        where,
    )
