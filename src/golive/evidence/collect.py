"""`golive env collect`: gather raw facts on a GPU node (NVML, nvidia-smi as fallback) or
inside the serving container (a stdlib probe run by the container's own Python).

These run on the machines being judged, so they never raise for a missing tool: what
could not be read is listed in `errors`, and `golive env` judges it as missing evidence.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import shutil
import socket
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from golive.errors import ConfigError, EvidenceError
from golive.evidence.facts import ContainerInfo, GpuInfo, HostInfo
from golive.evidence.nvidia import parse_nvidia_smi_xml, parse_proc_version
from golive.evidence.terminal import without_ansi

PROC_VERSION = Path("/proc/driver/nvidia/version")
_TIMEOUT_S = 60


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_tool(argv: list[str], stdin: str | None = None) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why not)."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found on PATH"
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(argv)}: {exc}"
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[:300]  # nvidia-smi: on stdout
        return None, f"{' '.join(argv)} exited {done.returncode}: {said}"
    return done.stdout, None


def collect_host(node: str | None = None) -> HostInfo:
    """Facts of this node: NVML first, `nvidia-smi -q -x` when NVML cannot be used."""
    node = node or socket.gethostname()
    errors: list[str] = []
    info = _from_nvml(node, errors) or _from_nvidia_smi(node, errors)
    if info is None:
        info = HostInfo(node=node, source="none")
    extra: dict[str, Any] = {"collected_at": _now()}
    try:
        extra["proc_driver_version"] = parse_proc_version(PROC_VERSION.read_text())
    except OSError as exc:
        errors.append(f"{PROC_VERSION}: {exc.strerror}")
    topology, problem = run_tool(["nvidia-smi", "topo", "-m"])
    extra["topology"] = None if topology is None else without_ansi(topology)
    if problem and info.gpus:
        errors.append(problem)
    if info.gpus and shutil.which("systemctl"):
        state, _ = run_tool(["systemctl", "is-active", "nvidia-fabricmanager"])
        extra["fabric_manager"] = (state or "inactive").strip()
        state, _ = run_tool(["systemctl", "is-active", "nvidia-imex"])
        extra["imex"] = (state or "inactive").strip()
    if info.gpus:
        extra["container_toolkit"] = _container_toolkit(errors)
    if info.gpus and shutil.which("nvidia-imex-ctl"):
        domain, problem = run_tool(["nvidia-imex-ctl", "-N"])
        extra["imex_domain"] = domain
        if problem:
            errors.append(problem)
    return info.model_copy(update={**extra, "errors": (*info.errors, *errors)})


_TOOLKIT_VERSION = re.compile(r"(?:CLI version|cli-version:)\s*v?([0-9]+\.[0-9]+\.[0-9]+\S*)")


def parse_toolkit_version(text: str) -> str | None:
    """The NVIDIA container toolkit's version from `nvidia-ctk --version` ("NVIDIA Container
    Toolkit CLI version 1.17.4") or `nvidia-container-cli --version` ("cli-version: 1.17.4")."""
    found = _TOOLKIT_VERSION.search(text)
    return found.group(1) if found else None


def _container_toolkit(errors: list[str]) -> str | None:
    """This node's container toolkit version, where a toolkit CLI is installed."""
    for argv in (["nvidia-ctk", "--version"], ["nvidia-container-cli", "--version"]):
        if shutil.which(argv[0]) is None:
            continue
        out, problem = run_tool(argv)
        version = parse_toolkit_version(out or "")
        if version is not None:
            return version
        errors.append(problem or f"{' '.join(argv)} printed no version: {(out or '')[:120]!r}")
    return None


def _from_nvml(node: str, errors: list[str]) -> HostInfo | None:
    try:
        import pynvml
    except ImportError:
        errors.append("nvidia-ml-py is not installed (pip install 'golive[gpu]'); using nvidia-smi")
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        errors.append(f"NVML init failed: {exc}")
        return None
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = tuple(nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount()))
        return HostInfo(
            node=node,
            source="nvml",
            driver_version=_str(pynvml.nvmlSystemGetDriverVersion()),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
            gpus=gpus,
        )
    except pynvml.NVMLError as exc:
        errors.append(f"NVML query failed: {exc}")
        return None
    finally:
        pynvml.nvmlShutdown()


def nvml_gpu(pynvml: Any, index: int) -> GpuInfo:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)

    def optional(call: Any, *args: Any) -> Any:
        try:
            return call(handle, *args)
        except (pynvml.NVMLError, TypeError, AttributeError):
            return None

    mig = optional(pynvml.nvmlDeviceGetMigMode)
    capability = optional(pynvml.nvmlDeviceGetCudaComputeCapability)
    persistence = optional(pynvml.nvmlDeviceGetPersistenceMode)
    fabric_state, fabric_status, cluster, clique = _nvml_fabric(pynvml, handle)
    return GpuInfo(
        index=index,
        name=_str(pynvml.nvmlDeviceGetName(handle)),
        uuid=_str(pynvml.nvmlDeviceGetUUID(handle)),
        pci_bus_id=_str(pynvml.nvmlDeviceGetPciInfo(handle).busId),
        memory_total_mib=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024),
        persistence_mode=None
        if persistence is None
        else ("Enabled" if persistence else "Disabled"),
        mig_mode=None if mig is None else ("Enabled" if mig[0] else "Disabled"),
        compute_capability=None if capability is None else f"{capability[0]}.{capability[1]}",
        fabric_state=fabric_state,
        fabric_status=fabric_status,
        fabric_cluster_uuid=cluster,
        fabric_clique_id=clique,
    )


_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}


def _nvml_fabric(pynvml: Any, handle: Any) -> tuple[str | None, str | None, str | None, str | None]:
    """Fabric (NVSwitch/NVLink domain) state, status, cluster UUID and clique id; the call's
    shape differs across NVML versions."""
    import ctypes

    for struct, call in (
        ("c_nvmlGpuFabricInfoV_t", "nvmlDeviceGetGpuFabricInfoV"),
        ("c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo"),
    ):
        if not hasattr(pynvml, struct) or not hasattr(pynvml, call):
            continue
        info = getattr(pynvml, struct)()
        try:
            getattr(pynvml, call)(handle, ctypes.byref(info))
        except (pynvml.NVMLError, TypeError, AttributeError, OSError):
            continue
        state = _FABRIC_STATES.get(int(info.state), str(info.state))
        if state == "Not Supported":
            return None, None, None, None
        status = "Success" if int(info.status) == 0 else f"error {info.status}"
        return state, status, _cluster_uuid(getattr(info, "clusterUuid", None)), _clique(info)
    return None, None, None, None


def _cluster_uuid(raw: Any) -> str | None:
    """NVML's 16-byte fabric cluster UUID as text (None where the structure has none)."""
    try:
        data = bytes(raw)[:16]
    except TypeError:
        return None
    if len(data) != 16:
        return None
    text = data.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _clique(info: Any) -> str | None:
    clique = getattr(info, "cliqueId", None)
    return None if clique is None else str(int(clique))


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvidia_smi(node: str, errors: list[str]) -> HostInfo | None:
    xml, problem = run_tool(["nvidia-smi", "-q", "-x"])
    if xml is None:
        errors.append(problem or "nvidia-smi failed")
        return None
    try:
        return parse_nvidia_smi_xml(xml, node).model_copy(update={"source": "nvidia-smi"})
    except EvidenceError as exc:
        errors.append(str(exc))
        return None


def collect_container(
    python: str, image: str | None = None, pid: int | None = None
) -> ContainerInfo:
    """Run the probe under the serving Python; add `docker inspect` digests when reachable.
    `python` is a command line: the interpreter here (`python3`), or one that reaches into the
    container (`docker exec -i CTR python3`, `kubectl exec -i -n NS POD -- python3`); the
    probe is stdlib only and goes in on stdin, so golive need not be installed there.
    `pid`: the serving process, where known (else the probe finds the oldest vLLM server):
    its command line and runtime variables are recorded."""
    script = resources.files("golive.evidence").joinpath("scripts/container_probe.py")
    try:
        command = shlex.split(python)
    except ValueError as exc:
        raise ConfigError(f"--python {python!r}: {exc}; quote it as a shell would") from exc
    if not command:
        raise ConfigError("--python is empty: give vLLM's interpreter, e.g. python3")
    out, problem = run_tool(
        [*command, "-", *([str(pid)] if pid is not None else [])], stdin=script.read_text()
    )
    if out is None:
        raise EvidenceError(
            f"the container probe could not run under {python}: {problem}; pass --python with "
            "the interpreter that runs vLLM"
        )
    try:
        data = json.loads(out)
    except json.JSONDecodeError as exc:
        hint = (
            ": with `docker exec` or `kubectl exec`, pass -i so the probe reaches its stdin"
            if not out.strip()
            else ""
        )
        raise EvidenceError(
            f"the container probe printed no JSON under {python}: {out[:200]!r}{hint}"
        ) from exc
    data["collected_at"] = _now()
    if image:
        data["image"] = image
        inspected, problem = run_tool(
            ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", image]
        )
        if inspected:
            data["image_digests"] = json.loads(inspected) or []
        elif problem:
            data.setdefault("errors", []).append(f"image digest not read: {problem}")
    return ContainerInfo.model_validate(data)
