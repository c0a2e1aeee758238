"""The CUDA half of the version chain: the CUDA the serving container was built for, one build
on every serving node, each host's driver, and the driver against the runtime (and
cuda-compat)."""

from __future__ import annotations

import dataclasses
import re

from golive.checks.env.chain_inputs import ChainInputs
from golive.evidence.facts import ContainerInfo
from golive.evidence.nvidia import cuda_major, driver_major
from golive.results import ENVIRONMENT_RESULT, CheckResult, SkipReason, Status

# CUDA major -> minimum driver branch (NVIDIA's minor-version compatibility table).
DRIVER_FLOOR = {13: 580, 12: 525, 11: 450}
_DATACENTER = re.compile(
    r"\b(H100|H200|H20|H800|GH200|A100|A800|A30|A40|A10|A16|A2|B100|B200|B300|GB200|GB300|L40S?|L4|L20|T4|V100)\b"
)


def container_cuda(container: ContainerInfo) -> int | None:
    """The CUDA major the serving stack was built for: torch's, else the runtime's."""
    return cuda_major(container.torch_cuda) or cuda_major(container.cudart_version)


# what must be one build on every node that serves (a mixed set is a rebuild, not a limit)
_ONE_BUILD = (
    ("vllm_version", "vLLM"),
    ("torch_version", "torch"),
    ("torch_cuda", "torch's CUDA"),
    ("cudart_version", "CUDA runtime"),
    ("nccl_version", "NCCL"),
    ("container_runtime", "container runtime"),
)


def runtime_problems(inputs: ChainInputs) -> list[str]:
    """Why the serving runtime is not one build that sees its GPUs: a node's container
    missing, a build, runtime or container toolkit that differs across nodes, a CUDA torch
    that sees no GPU (judged only where the probe recorded what torch sees)."""
    members: list[tuple[ContainerInfo | None, str]] = list(inputs.node_containers)
    if inputs.container is not None:
        members.insert(0, (inputs.container, inputs.container_path))
    problems = [
        f"{path} is listed in environment/chain-inputs.json but missing"
        for c, path in members
        if c is None
    ]
    seen = [(c, p) for c, p in members if c is not None]
    # whether the runtime exposes the GPUs: judged on the serving container's probe where
    # nothing hid them from it (a Ray task that asks for no GPU runs with CUDA_VISIBLE_DEVICES
    # empty; a Ray head often has none), and only where the probe recorded what torch saw
    serving = [] if inputs.container is None else [(inputs.container, inputs.container_path)]
    for container, path in serving:
        visible = container.cuda_visible_devices
        if visible is not None and visible.strip() in (
            "",
            "-1",
            "NoDevFiles",
        ):  # its launcher hid the GPUs from the probe: says nothing of the runtime
            continue
        if container.gpus is not None and container.torch_cuda and not container.gpus:
            problems.append(
                f"{path}: torch {container.torch_version} (CUDA {container.torch_cuda}) sees no "
                f"GPU (CUDA_VISIBLE_DEVICES={container.cuda_visible_devices!r}): the container "
                "runtime does not expose the GPUs"
            )
    toolkits = {path: h.container_toolkit for h, path in inputs.hosts if h.container_toolkit}
    if len(set(toolkits.values())) > 1:
        shown = ", ".join(f"{v} ({p})" for p, v in sorted(toolkits.items()))
        problems.append(f"the NVIDIA container toolkit differs across the nodes: {shown}")
    for field, label in _ONE_BUILD:
        # only what each probe knew: an older probe's unknown is not another build
        values = {p: getattr(c, field) for c, p in seen if getattr(c, field) is not None}
        if len(set(values.values())) > 1:
            by_value: dict[str, list[str]] = {}
            for path, value in sorted(values.items()):
                by_value.setdefault(str(value), []).append(path)
            shown = ", ".join(
                f"{v} ({', '.join(paths)})"
                for v, paths in sorted(by_value.items(), key=lambda kv: (len(kv[1]), kv[0]))
            )
            problems.append(f"{label} differs across the serving containers: {shown}")
    return problems


def check_container_cuda(inputs: ChainInputs) -> CheckResult:
    want = inputs.profile.chain.cuda_major
    critical = want is not None
    container = inputs.container
    problems = runtime_problems(inputs)
    if problems:
        where = sorted({inputs.container_path, *(p for _, p in inputs.node_containers)})
        return ENVIRONMENT_RESULT(
            "environment.container_cuda",
            Status.FAIL,
            "the serving runtime is not one build that sees its GPUs: "
            + "; ".join(problems)
            + ": rebuild so every node runs the same image with its GPUs exposed",
            {} if container is None else _cuda_facts(container),
            evidence=where,
        )
    if container is None:
        return ENVIRONMENT_RESULT(
            "environment.container_cuda",
            Status.NO_DATA,
            "no container evidence: run `golive env collect --container` inside the serving "
            "container and pass --container-info",
            critical=critical,
        )
    where = [inputs.container_path]
    measurements = _cuda_facts(container)
    if container.torch_version is None:  # torch did not import: nothing is known of CUDA
        return ENVIRONMENT_RESULT(
            "environment.container_cuda",
            Status.NO_DATA,
            "the container probe could not import torch, so its CUDA build is unknown ("
            + ("; ".join(e for e in container.errors if "torch" in e) or "no torch facts")
            + "): run `golive env collect --container --python` with the Python that serves",
            measurements,
            critical=critical,
            evidence=where,
        )
    if container.torch_cuda is None:
        status = Status.FAIL if critical else Status.PASS
        return ENVIRONMENT_RESULT(
            "environment.container_cuda",
            status,
            f"the container's torch {container.torch_version} has no CUDA (a CPU build)"
            + (f"; the profile needs CUDA {want}" if critical else ""),
            measurements,
            critical=critical,
            evidence=where,
        )
    major = container_cuda(container)
    if want is not None and major != want:
        return ENVIRONMENT_RESULT(
            "environment.container_cuda",
            Status.FAIL,
            f"the container runs CUDA {container.torch_cuda} (torch {container.torch_version}); "
            f"the profile needs CUDA {want}.x",
            measurements,
            evidence=where,
        )
    return ENVIRONMENT_RESULT(
        "environment.container_cuda",
        Status.PASS,
        f"torch {container.torch_version} built for CUDA {container.torch_cuda}, runtime "
        f"{container.cudart_version}, NCCL {container.nccl_version}",
        measurements,
        critical=critical,
        evidence=where,
    )


def _cuda_facts(container: ContainerInfo) -> dict[str, str | int | None]:
    return {
        "torch": container.torch_version,
        "torch_cuda": container.torch_cuda,
        "cudart": container.cudart_version,
        "nccl": container.nccl_version,
    }


def check_host_driver(inputs: ChainInputs) -> CheckResult:
    """Every node's driver: at least the profile's branch, and one family across nodes."""
    minimum = inputs.profile.chain.min_driver_major
    critical = minimum is not None or bool(inputs.hosts)
    if not inputs.hosts:
        return ENVIRONMENT_RESULT(
            "environment.host_driver",
            Status.NO_DATA,
            "no host evidence: pass --nvidia-smi-xml or --host-info for every node",
            critical=critical,
        )
    where = [path for _, path in inputs.hosts]
    drivers = {host.node: host.driver_version for host, _ in inputs.hosts}
    measurements = {f"driver[{node}]": version for node, version in drivers.items()}
    unknown = [node for node, version in drivers.items() if driver_major(version) is None]
    if unknown:
        return ENVIRONMENT_RESULT(
            "environment.host_driver",
            Status.NO_DATA,
            f"driver version unreadable on {', '.join(unknown)}",
            measurements,
            critical=critical,
            evidence=where,
        )
    split = [
        f"{host.node}: kernel module {host.proc_driver_version}, NVML {host.driver_version}"
        for host, _ in inputs.hosts
        if host.proc_driver_version and host.proc_driver_version != host.driver_version
    ]
    if split:
        return ENVIRONMENT_RESULT(
            "environment.host_driver",
            Status.FAIL,
            "the loaded kernel module and the user-space driver disagree ("
            + "; ".join(split)
            + "): a driver change without a reboot is not one coherent driver",
            measurements,
            evidence=where,
        )
    branches = {node: driver_major(version) for node, version in drivers.items()}
    if len(set(branches.values())) > 1:
        mix = ", ".join(f"{node}: R{branch}" for node, branch in sorted(branches.items()))
        return ENVIRONMENT_RESULT(
            "environment.host_driver",
            Status.FAIL,
            f"mixed driver families across nodes ({mix}): every node must run the same branch",
            measurements,
            evidence=where,
        )
    if minimum is not None:
        old = sorted(node for node, branch in branches.items() if (branch or 0) < minimum)
        if old:
            return ENVIRONMENT_RESULT(
                "environment.host_driver",
                Status.FAIL,
                f"driver {drivers[old[0]]} on {', '.join(old)} is below R{minimum}: a CUDA "
                f"{inputs.profile.chain.cuda_major} image needs R{minimum}+ even if nvidia-smi "
                "prints a CUDA line",
                measurements,
                evidence=where,
            )
    branch = next(iter(branches.values()))
    return ENVIRONMENT_RESULT(
        "environment.host_driver",
        Status.PASS,
        f"{len(drivers)} node(s) on driver branch R{branch}"
        + (f" (>= R{minimum})" if minimum else ""),
        measurements,
        critical=critical,
        evidence=where,
    )


def check_driver_runtime(inputs: ChainInputs) -> CheckResult:
    """The container's CUDA against every host driver, and whether cuda-compat is in use."""
    container = inputs.container
    critical = inputs.profile.chain.cuda_major is not None or (
        container is not None and bool(inputs.hosts)
    )
    if container is None or not inputs.hosts:
        return ENVIRONMENT_RESULT(
            "environment.driver_runtime",
            Status.NO_DATA,
            "needs both container and host evidence to compare the CUDA runtime with the driver",
            critical=critical,
        )
    where = [inputs.container_path, *(path for _, path in inputs.hosts)]
    runtime = container_cuda(container)
    if container.torch_version is None:
        return ENVIRONMENT_RESULT(
            "environment.driver_runtime",
            Status.NO_DATA,
            "the container probe could not import torch: its CUDA runtime is unknown, so it "
            "cannot be compared with the driver",
            critical=critical,
            evidence=where,
        )
    if runtime is None or container.torch_cuda is None:
        return dataclasses.replace(
            ENVIRONMENT_RESULT(
                "environment.driver_runtime",
                Status.SKIPPED,
                "the container does not use CUDA; nothing to compare with the driver",
                critical=False,
                evidence=where,
            ),
            skip_reason=SkipReason.NOT_USED,
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
        return ENVIRONMENT_RESULT(
            "environment.driver_runtime",
            Status.FAIL,
            "; ".join(problems),
            measurements,
            evidence=where,
        )
    note = " (cuda-compat libraries in use on datacenter GPUs)" if compat_used else ""
    return ENVIRONMENT_RESULT(
        "environment.driver_runtime",
        Status.WARN if compat_used else Status.PASS,
        f"CUDA {runtime} runtime is supported by every host driver{note}",
        measurements,
        critical=critical,
        evidence=where,
    )


def _api_above(api: int, host_cuda: str) -> bool:
    major, _, minor = host_cuda.partition(".")
    try:
        return api > int(major) * 1000 + int(minor or 0) * 10
    except ValueError:
        return False
