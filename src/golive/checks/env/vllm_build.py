"""`environment.vllm_version`: the live API, the startup log and the container agree on one
vLLM build, at least the profile's minimum, and the official one unless the config declares a
custom build."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from golive.checks.env.chain_inputs import ChainInputs, Source
from golive.evidence.image_ref import same_repository, split_image
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status

_CUSTOM = re.compile(r"\.dev\d+|\+g[0-9a-f]{6,}|\+[0-9a-f]{7,}")


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
        return ENVIRONMENT_RESULT(
            "environment.vllm_version",
            Status.NO_DATA,
            "no vLLM version known: give --target, --log or --container-info",
        )
    versions = sorted({s.value for s in sources})
    measurements: dict[str, float | int | str | bool | None] = {"vllm_version": versions[0]}
    if len(versions) > 1:
        seen = ", ".join(f"{s.value} ({s.where})" for s in sources)
        return ENVIRONMENT_RESULT(
            "environment.vllm_version",
            Status.FAIL,
            f"the layers disagree on the vLLM version: {seen}",
            measurements,
            evidence=where,
        )
    version = versions[0]
    minimum = inputs.profile.chain.min_vllm
    parsed = _parse_version(version)
    if minimum is not None and (parsed is None or parsed.release < Version(minimum).release):
        return ENVIRONMENT_RESULT(
            "environment.vllm_version",
            Status.FAIL,
            f"vLLM {version} is older than the profile's minimum {minimum}",
            measurements,
            evidence=where,
        )
    nightly_in_official = _CUSTOM.search(version) is not None and _official_image(inputs)
    if nightly_in_official:  # e.g. the Kimi K3 image, built from a nightly: not a custom build
        measurements["nightly_build"] = True
    elif _CUSTOM.search(version):
        measurements["custom_build"] = True
        if inputs.profile.chain.image is not None:
            return ENVIRONMENT_RESULT(
                "environment.vllm_version",
                Status.FAIL,
                f"vLLM {version} is a custom/dev build: it goes on a separate evidence track and "
                "never counts as the official recipe",
                measurements,
                evidence=where,
            )
        if inputs.custom_build is None:
            return ENVIRONMENT_RESULT(
                "environment.vllm_version",
                Status.FAIL,
                f"vLLM {version} is a custom/dev build with no build record: give "
                "environment.custom_build (source branch, commit, lockfile, build command, "
                "image digest, rollback image)",
                measurements,
                evidence=where,
            )
        return ENVIRONMENT_RESULT(
            "environment.vllm_version",
            Status.PASS,
            f"vLLM {version}: custom build on its own evidence track (commit "
            f"{inputs.custom_build.commit}, rollback {inputs.custom_build.rollback_image})",
            measurements,
            evidence=where,
        )
    floor = "" if minimum is None else f" (minimum {minimum})"
    if nightly_in_official:
        floor += f", the nightly the profile's image {inputs.profile.chain.image} is built from"
    measurements["sources"] = len(sources)
    if len(sources) < 2:
        return ENVIRONMENT_RESULT(
            "environment.vllm_version",
            Status.WARN,
            f"vLLM {version}{floor} from one source only ({sources[0].where}): nothing "
            "corroborates it; give a second one (--target for the live /version, --log, "
            "--container-info)",
            measurements,
            evidence=where,
        )
    return ENVIRONMENT_RESULT(
        "environment.vllm_version",
        Status.PASS,
        f"vLLM {version}{floor}, agreed by {len(sources)} source(s)",
        measurements,
        evidence=where,
    )
