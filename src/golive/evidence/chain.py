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

from golive.config import CustomBuild, ParallelConfig, Profile
from golive.evidence.facts import ContainerInfo, HostInfo
from golive.evidence.nvidia import cuda_major, driver_major
from golive.evidence.startup_log import StartupFacts
from golive.results import CheckClass, CheckResult, Status

# CUDA major -> minimum driver branch (NVIDIA's minor-version compatibility table).
DRIVER_FLOOR = {13: 580, 12: 525, 11: 450}
_CUSTOM = re.compile(r"\.dev\d+|\+g[0-9a-f]{6,}|\+[0-9a-f]{7,}")
_DATACENTER = re.compile(
    r"\b(H100|H200|H20|H800|GH200|A100|A800|A30|A40|A10|A16|A2|B100|B200|B300|GB200|GB300|L40S?|L4|L20|T4|V100)\b"
)


@dataclass(frozen=True, slots=True)
class Source:
    """A piece of evidence and where it lives in the bundle."""

    value: str
    where: str


@dataclass(frozen=True, slots=True)
class ChainInputs:
    profile: Profile
    live_version: Source | None = None
    live_max_model_len: Source | None = None
    image: Source | None = None
    startup: StartupFacts | None = None
    startup_path: str = "environment/startup.log"
    container: ContainerInfo | None = None
    container_path: str = "environment/container.json"
    hosts: tuple[tuple[HostInfo, str], ...] = ()
    declared_parallel: ParallelConfig | None = None
    custom_build: CustomBuild | None = None
    cache_info: Mapping[str, str] = field(default_factory=dict)


def _env(
    check_id: str,
    critical: bool,
    status: Status,
    summary: str,
    measurements: Mapping[str, float | int | str | bool | None] | None = None,
    evidence: Sequence[str] = (),
) -> CheckResult:
    return CheckResult(
        check_id,
        CheckClass.ENVIRONMENT,
        critical,
        status,
        summary,
        dict(measurements or {}),
        tuple(evidence),
    )


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """("vllm/vllm-openai", "kimi-k3", "sha256:...") from `name:tag@sha256:...`."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def check_image(inputs: ChainInputs) -> CheckResult:
    expected = inputs.profile.chain.image
    critical = expected is not None
    if inputs.image is None:
        return _env(
            "environment.image",
            critical,
            Status.NO_DATA,
            "no image reference given (--image, environment.image, or container info)",
        )
    name, tag, digest = split_image(inputs.image.value)
    measurements = {"image": inputs.image.value, "digest": digest}
    where = [inputs.image.where]
    if expected is not None:
        want_name, want_tag, _ = split_image(expected)
        if (name, tag) != (want_name, want_tag):
            return _env(
                "environment.image",
                True,
                Status.FAIL,
                f"image {name}:{tag} is not the profile's image {expected} (a general CUDA "
                "image or another build is not the official recipe)",
                measurements,
                where,
            )
    if digest is None and inputs.profile.chain.image_digest_required:
        return _env(
            "environment.image",
            critical,
            Status.NO_DATA,
            f"image {inputs.image.value} has no digest recorded; give name:tag@sha256:... so the "
            "exact image is known and can be rolled back to",
            measurements,
            where,
        )
    return _env(
        "environment.image",
        critical,
        Status.PASS,
        f"image {inputs.image.value}" + ("" if expected is None else " is the profile's image"),
        measurements,
        where,
    )


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
        return _env(
            "environment.vllm_version",
            True,
            Status.NO_DATA,
            "no vLLM version known: give --target, --log or --container-info",
        )
    versions = sorted({s.value for s in sources})
    measurements: dict[str, float | int | str | bool | None] = {"vllm_version": versions[0]}
    if len(versions) > 1:
        seen = ", ".join(f"{s.value} ({s.where})" for s in sources)
        return _env(
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
        return _env(
            "environment.vllm_version",
            True,
            Status.FAIL,
            f"vLLM {version} is older than the profile's minimum {minimum}",
            measurements,
            where,
        )
    if _CUSTOM.search(version):
        measurements["custom_build"] = True
        if inputs.profile.chain.image is not None:
            return _env(
                "environment.vllm_version",
                True,
                Status.FAIL,
                f"vLLM {version} is a custom/dev build: it goes on a separate evidence track and "
                "never counts as the official recipe",
                measurements,
                where,
            )
        if inputs.custom_build is None:
            return _env(
                "environment.vllm_version",
                True,
                Status.FAIL,
                f"vLLM {version} is a custom/dev build with no build record: give "
                "environment.custom_build (source branch, commit, lockfile, build command, "
                "image digest, rollback image)",
                measurements,
                where,
            )
        return _env(
            "environment.vllm_version",
            True,
            Status.PASS,
            f"vLLM {version}: custom build on its own evidence track (commit "
            f"{inputs.custom_build.commit}, rollback {inputs.custom_build.rollback_image})",
            measurements,
            where,
        )
    floor = "" if minimum is None else f" (minimum {minimum})"
    return _env(
        "environment.vllm_version",
        True,
        Status.PASS,
        f"vLLM {version}{floor}, agreed by {len(sources)} source(s)",
        measurements,
        where,
    )


def container_cuda(container: ContainerInfo) -> int | None:
    """The CUDA major the serving stack was built for: torch's, else the runtime's."""
    return cuda_major(container.torch_cuda) or cuda_major(container.cudart_version)


def check_container_cuda(inputs: ChainInputs) -> CheckResult:
    want = inputs.profile.chain.cuda_major
    critical = want is not None
    container = inputs.container
    if container is None:
        return _env(
            "environment.container_cuda",
            critical,
            Status.NO_DATA,
            "no container evidence: run `golive env collect --container` inside the serving "
            "container and pass --container-info",
        )
    where = [inputs.container_path]
    measurements = {
        "torch": container.torch_version,
        "torch_cuda": container.torch_cuda,
        "cudart": container.cudart_version,
        "nccl": container.nccl_version,
    }
    if container.torch_cuda is None:
        status = Status.FAIL if critical else Status.PASS
        return _env(
            "environment.container_cuda",
            critical,
            status,
            f"the container's torch {container.torch_version} has no CUDA (a CPU build)"
            + (f"; the profile needs CUDA {want}" if critical else ""),
            measurements,
            where,
        )
    major = container_cuda(container)
    if want is not None and major != want:
        return _env(
            "environment.container_cuda",
            True,
            Status.FAIL,
            f"the container runs CUDA {container.torch_cuda} (torch {container.torch_version}); "
            f"the profile needs CUDA {want}.x",
            measurements,
            where,
        )
    return _env(
        "environment.container_cuda",
        critical,
        Status.PASS,
        f"torch {container.torch_version} built for CUDA {container.torch_cuda}, runtime "
        f"{container.cudart_version}, NCCL {container.nccl_version}",
        measurements,
        where,
    )


def check_host_driver(inputs: ChainInputs) -> CheckResult:
    """Every node's driver: at least the profile's branch, and one family across nodes."""
    minimum = inputs.profile.chain.min_driver_major
    critical = minimum is not None or bool(inputs.hosts)
    if not inputs.hosts:
        return _env(
            "environment.host_driver",
            critical,
            Status.NO_DATA,
            "no host evidence: pass --nvidia-smi-xml or --host-info for every node",
        )
    where = [path for _, path in inputs.hosts]
    drivers = {host.node: host.driver_version for host, _ in inputs.hosts}
    measurements = {f"driver[{node}]": version for node, version in drivers.items()}
    unknown = [node for node, version in drivers.items() if driver_major(version) is None]
    if unknown:
        return _env(
            "environment.host_driver",
            critical,
            Status.NO_DATA,
            f"driver version unreadable on {', '.join(unknown)}",
            measurements,
            where,
        )
    branches = {node: driver_major(version) for node, version in drivers.items()}
    if len(set(branches.values())) > 1:
        mix = ", ".join(f"{node}: R{branch}" for node, branch in sorted(branches.items()))
        return _env(
            "environment.host_driver",
            True,
            Status.FAIL,
            f"mixed driver families across nodes ({mix}): every node must run the same branch",
            measurements,
            where,
        )
    if minimum is not None:
        old = sorted(node for node, branch in branches.items() if (branch or 0) < minimum)
        if old:
            return _env(
                "environment.host_driver",
                True,
                Status.FAIL,
                f"driver {drivers[old[0]]} on {', '.join(old)} is below R{minimum}: a CUDA "
                f"{inputs.profile.chain.cuda_major} image needs R{minimum}+ even if nvidia-smi "
                "prints a CUDA line",
                measurements,
                where,
            )
    branch = next(iter(branches.values()))
    return _env(
        "environment.host_driver",
        critical,
        Status.PASS,
        f"{len(drivers)} node(s) on driver branch R{branch}"
        + (f" (>= R{minimum})" if minimum else ""),
        measurements,
        where,
    )


def check_driver_runtime(inputs: ChainInputs) -> CheckResult:
    """The container's CUDA against every host driver, and whether cuda-compat is in use."""
    container = inputs.container
    critical = inputs.profile.chain.cuda_major is not None or (
        container is not None and bool(inputs.hosts)
    )
    if container is None or not inputs.hosts:
        return _env(
            "environment.driver_runtime",
            critical,
            Status.NO_DATA,
            "needs both container and host evidence to compare the CUDA runtime with the driver",
        )
    where = [inputs.container_path, *(path for _, path in inputs.hosts)]
    runtime = container_cuda(container)
    if runtime is None or container.torch_cuda is None:
        return _env(
            "environment.driver_runtime",
            False,
            Status.SKIPPED,
            "the container does not use CUDA; nothing to compare with the driver",
            {},
            where,
        )
    floor = DRIVER_FLOOR.get(runtime)
    problems: list[str] = []
    compat_used = False
    for host, _ in inputs.hosts:
        branch = driver_major(host.driver_version) or 0
        if floor is not None and branch < floor:
            problems.append(
                f"{host.node}: driver {host.driver_version} < R{floor} needed by CUDA {runtime}"
            )
        api = container.cuda_driver_api_version
        host_cuda = cuda_major(host.cuda_driver_version)
        if (
            api is not None
            and host.cuda_driver_version
            and _api_above(api, host.cuda_driver_version)
        ):
            compat_used = True
            gpu_names = {g.name for g in host.gpus}
            if not all(_DATACENTER.search(name) for name in gpu_names):
                problems.append(
                    f"{host.node}: cuda-compat in use (driver API {api} > host CUDA "
                    f"{host.cuda_driver_version}) on non-datacenter GPUs {sorted(gpu_names)}: "
                    "error 804 territory"
                )
        elif host_cuda is not None and host_cuda < runtime and not compat_used:
            problems.append(
                f"{host.node}: the driver supports CUDA {host.cuda_driver_version} only; the "
                f"container needs {runtime}.x"
            )
    measurements = {
        "container_cuda_major": runtime,
        "driver_api_version": container.cuda_driver_api_version,
        "cuda_compat_in_use": compat_used,
        "cuda_compat_libs": len(container.cuda_compat_libs),
    }
    if problems:
        return _env(
            "environment.driver_runtime",
            True,
            Status.FAIL,
            "; ".join(problems),
            measurements,
            where,
        )
    note = " (cuda-compat libraries in use on datacenter GPUs)" if compat_used else ""
    return _env(
        "environment.driver_runtime",
        critical,
        Status.WARN if compat_used else Status.PASS,
        f"CUDA {runtime} runtime is supported by every host driver{note}",
        measurements,
        where,
    )


def _api_above(api: int, host_cuda: str) -> bool:
    major, _, minor = host_cuda.partition(".")
    try:
        return api > int(major) * 1000 + int(minor or 0) * 10
    except ValueError:
        return False


def check_gpus(inputs: ChainInputs) -> CheckResult:
    """GPU class and count against the profile; MIG, persistence and fabric state."""
    want = inputs.profile.chain.min_gpus
    critical = want is not None or bool(inputs.hosts)
    if not inputs.hosts:
        return _env(
            "environment.gpus",
            critical,
            Status.NO_DATA,
            "no host evidence, so GPU count and class are unknown"
            + (f" (the profile needs at least {want})" if want else ""),
        )
    where = [path for _, path in inputs.hosts]
    gpus = [(host.node, gpu) for host, _ in inputs.hosts for gpu in host.gpus]
    names = sorted({gpu.name for _, gpu in gpus})
    measurements: dict[str, float | int | str | bool | None] = {
        "gpu_count": len(gpus),
        "nodes": len(inputs.hosts),
        "gpu_classes": ", ".join(names),
    }
    failures: list[str] = []
    warnings: list[str] = []
    if want is not None and len(gpus) < want:
        failures.append(f"{len(gpus)} GPU(s) visible, the profile needs at least {want}")
    if len(names) > 1:
        failures.append(f"mixed GPU classes: {', '.join(names)}")
    for node, gpu in gpus:
        if gpu.fabric_state not in (None, "Completed") or gpu.fabric_status not in (
            None,
            "Success",
        ):
            failures.append(
                f"{node} GPU {gpu.index}: fabric {gpu.fabric_state}/{gpu.fabric_status} (CUDA will "
                "fail with error 802 until nvidia-fabricmanager finishes)"
            )
        if gpu.mig_mode == "Enabled":
            warnings.append(f"{node} GPU {gpu.index}: MIG enabled")
        if gpu.persistence_mode == "Disabled":
            warnings.append(f"{node} GPU {gpu.index}: persistence mode off")
    if failures:
        return _env("environment.gpus", True, Status.FAIL, "; ".join(failures), measurements, where)
    summary = f"{len(gpus)} x {', '.join(names) or 'no GPU'} on {len(inputs.hosts)} node(s)"
    if warnings:
        return _env(
            "environment.gpus",
            critical,
            Status.WARN,
            f"{summary}; {'; '.join(warnings)}",
            measurements,
            where,
        )
    return _env("environment.gpus", critical, Status.PASS, summary, measurements, where)
