"""Known failure and fallback patterns of a vLLM startup log, matched on a line's message."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Severity(enum.StrEnum):
    FATAL = "fatal"  # the engine cannot serve as configured: rebuild or fix topology
    WARNING = "warning"  # recorded and shown; not by itself a reason to rebuild
    INFO = "info"  # recorded; vLLM prints it in normal operation (e.g. while compiling)


@dataclass(frozen=True, slots=True)
class Signature:
    """A known failure or fallback pattern, with where it was found."""

    kind: str
    severity: Severity
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class _Pattern:
    kind: str
    severity: Severity
    regex: re.Pattern[str]
    meaning: str


def signature_pattern(kind: str, severity: Severity, pattern: str, meaning: str) -> _Pattern:
    return _Pattern(kind, severity, re.compile(pattern, re.IGNORECASE), meaning)


F, W = Severity.FATAL, Severity.WARNING
# Signatures that vLLM prints informationally before the server is ready (compilation,
# loading) and that mean a stall only once it serves (vLLM #43420).
STALL_WHEN_SERVING = frozenset({"hang_hint"})
PATTERNS: tuple[_Pattern, ...] = (
    signature_pattern(
        "cuda_init_802",
        F,
        r"Error 802|system not yet initialized",
        "CUDA error 802: the NVSwitch fabric manager is not ready (nvidia-fabricmanager)",
    ),
    signature_pattern(
        "cuda_init_803",
        F,
        r"Error 803|unsupported display driver\s*/\s*cuda driver comb",
        "CUDA error 803: driver/CUDA mismatch (cuda-compat libraries shadowing the host driver?)",
    ),
    signature_pattern(
        "cuda_init_804",
        F,
        r"Error 804|forward compatibility was attempted on non supported HW",
        "CUDA error 804: forward compatibility on a GPU that does not support it",
    ),
    signature_pattern(
        "driver_too_old",
        F,
        r"NVIDIA driver on your system is too old",
        "the host driver is older than the container's CUDA needs",
    ),
    signature_pattern(
        "cuda_init",
        F,
        r"CUDA initialization|cudaGetDeviceCount\(\)|no CUDA-capable device",
        "CUDA could not initialise",
    ),
    signature_pattern(
        "nccl_failure",
        F,
        r"NCCL error|ncclInvalidUsage|ncclSystemError|ncclUnhandledCudaError|ncclInternalError"
        r"|ncclRemoteError|mlx5dv_reg_dmabuf_mr",
        "NCCL failed: collective communication between GPUs or nodes is broken",
    ),
    signature_pattern(
        "no_kernel_image",
        F,
        r"no kernel image is available for execution",
        "the image has no kernels for this GPU architecture",
    ),
    signature_pattern(
        "unsupported_arch",
        F,
        r"is not compatible with the current PyTorch installation|unsupported (GPU )?architecture"
        r"|not supported on this (GPU|architecture)",
        "the GPU architecture is not supported by this build",
    ),
    signature_pattern(
        "oom_kv_cache",
        F,
        r"No available memory for the cache blocks",
        "no memory left for KV cache blocks at startup",
    ),
    signature_pattern(
        "oom_max_model_len",
        F,
        r"larger than the available KV cache memory"
        r"|is larger than the maximum number of tokens that can be stored in KV cache",
        "max_model_len needs more KV cache than fits: lower it or add memory",
    ),
    signature_pattern(
        "oom_startup_memory",
        F,
        r"Free memory on device .* is less than desired GPU memory utilization",
        "the GPU did not have the memory gpu_memory_utilization asks for at startup",
    ),
    signature_pattern(
        "oom_load",
        F,
        r"OutOfMemoryError|CUDA out of memory",
        "out of memory while loading or initialising",
    ),
    signature_pattern(
        "platform_unsupported",
        F,
        r"current platform \S+ does not support",
        "the platform vLLM detected does not support a setting the server was started with "
        "(the CPU build refuses --distributed-executor-backend ray; a GPU container that cannot "
        "see its GPUs is detected as no platform): change the setting, or run the build for the "
        "hardware with its devices exposed",
    ),
    signature_pattern(
        "engine_failed",
        F,
        r"EngineCore failed to start|Engine core initialization failed"
        r"|RuntimeError: Engine process failed to start",
        "the engine process failed to start",
    ),
    signature_pattern(
        "fallback", W, r"\bfall(?:ing)? ?back\b|\bfallback\b", "a fallback code path was taken"
    ),
    signature_pattern(
        "hang_hint",
        W,
        r"No available shared memory broadcast block found",
        "a worker waited on the shared-memory broadcast while serving: a stalled process",
    ),
    signature_pattern(
        "triton_jit",
        W,
        r"Triton kernel JIT compilation during inference",
        "a kernel was compiled on a live request: warm-up did not cover that shape, so "
        "production sees latency spikes",
    ),
    signature_pattern(
        "fd_ulimit",
        W,
        r"Found ulimit of \d+ and failed to automatically increase",
        "the open-file limit is low and could not be raised: fd errors under load",
    ),
)


def explain(signature: Signature) -> str:
    """The meaning of a signature kind, for summaries."""
    for pattern in PATTERNS:
        if pattern.kind == signature.kind:
            return pattern.meaning
    return signature.kind
