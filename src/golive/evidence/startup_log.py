"""Pure parser of a vLLM startup log: what the engine says it started as, and what went wrong.

Line prefixes (`(EngineCore_DP0 pid=N) INFO 11-29 18:29:58 [core.py:133] `) are stripped and
messages are matched on their text only (line numbers in `[file.py:N]` change every
release). Unknown lines are ignored; nothing here raises on odd input.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]*?)(?: pid=\d+)?\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s?(?P<msg>.*)$"
)


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


@dataclass(frozen=True, slots=True)
class StartupFacts:
    """What the log says the engine started as; `None` where the log does not say."""

    vllm_version: str | None = None
    version_line: int | None = None
    model: str | None = None
    non_default_args: Mapping[str, Any] = field(default_factory=dict)
    args_line: int | None = None
    engine_config: Mapping[str, str] = field(default_factory=dict)
    engine_line: int | None = None
    architecture: str | None = None
    max_model_len: int | None = None
    kv_cache_tokens: int | None = None
    kv_cache_device: str | None = None
    max_concurrency: float | None = None
    kv_cache_line: int | None = None
    available_kv_gib: float | None = None
    weights_load_s: float | None = None
    model_load_gib: float | None = None
    init_engine_s: float | None = None
    compile_s: float | None = None  # torch.compile, in total
    cuda_graph_gib: float | None = None  # CUDA graph pool memory, actual
    auto_tool_choice: bool = False
    mamba_cache_mode: str | None = None
    mamba_prefix_caching: bool | None = None
    attention_block_size: int | None = None
    ready_line: int | None = None
    signatures: tuple[Signature, ...] = ()
    line_count: int = 0
    text: str = field(default="", repr=False, compare=False)  # the log as parsed

    def arg(self, name: str) -> Any:
        """A setting from the non-default args, else from the engine config line."""
        if name in self.non_default_args:
            return self.non_default_args[name]
        return self.engine_config.get(name)

    @property
    def tool_parser(self) -> str | None:
        value = self.arg("tool_call_parser")
        return str(value) if value else None

    @property
    def reasoning_parser(self) -> str | None:
        value = self.arg("reasoning_parser") or self.engine_config.get("reasoning_parser")
        return str(value) if value else None

    @property
    def prefix_caching(self) -> bool | None:
        value = self.arg("enable_prefix_caching")
        if value is None:
            return None
        return str(value).lower() == "true"

    def load_figures(self) -> dict[str, float | None]:
        """What loading the model cost, as the engine printed it (None where it did not)."""
        return {
            "weights_load_s": self.weights_load_s,
            "model_load_gib": self.model_load_gib,
            "init_engine_s": self.init_engine_s,
            "compile_s": self.compile_s,
            "cuda_graph_gib": self.cuda_graph_gib,
            "available_kv_gib": self.available_kv_gib,
        }

    def parallel(self) -> dict[str, int]:
        """Tensor, pipeline, data and expert parallel settings the engine started with."""
        sizes: dict[str, int] = {}
        for key, name in (
            ("tensor_parallel_size", "tp"),
            ("pipeline_parallel_size", "pp"),
            ("data_parallel_size", "dp"),
        ):
            value = self.arg(key)
            sizes[name] = int(value) if value is not None and str(value).isdigit() else 1
        sizes["ep"] = (
            1 if not _truthy(self.arg("enable_expert_parallel")) else sizes["tp"] * sizes["dp"]
        )
        return sizes

    @property
    def fatal(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.severity is Severity.FATAL)


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def _message(raw: str) -> str:
    match = _PREFIX.match(raw)
    return match.group("msg") if match else raw


_VERSION = re.compile(r"version (\d+\.\d+\.\d+\S*)")
_OLD_VERSION = re.compile(r"vLLM API server version (\S+)")
_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v(\S+)\) with config: (.*)$")
_KV = re.compile(
    r"(GPU|CPU|XPU|TPU) KV cache size: ([\d,]+) tokens(?:, Maximum concurrency for ([\d,]+) "
    r"tokens per request: ([\d.]+)x)?"
)
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_NUMBER_AFTER = {
    "max_model_len": re.compile(r"Using max model len (\d+)"),
    "available_kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "weights_load_s": re.compile(r"Loading weights took ([\d.]+) seconds"),
    "init_engine_s": re.compile(r"init engine \(.*\) took ([\d.]+) s"),
    "attention_block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
    "compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "cuda_graph_gib": re.compile(r"CUDA graph pool memory: ([\d.]+) GiB \(actual\)"),
}
_MODEL_LOAD = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w+)'")
_MAMBA_PREFIX = re.compile(
    r"Prefix caching in Mamba cache '\w+' mode is currently (enabled|disabled)"
)


def parse_startup_log(text: str) -> StartupFacts:
    """Parse a whole startup log. Never raises; unknown lines are skipped."""
    facts: dict[str, Any] = {}
    signatures: list[Signature] = []
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        msg = _message(raw)
        _read_facts(msg, number, facts)
        for pattern in PATTERNS:
            if pattern.regex.search(msg):
                signatures.append(
                    Signature(pattern.kind, pattern.severity, number, msg.strip()[:300])
                )
                break
    ready = facts.get("ready_line")
    signatures = [
        Signature(s.kind, Severity.INFO, s.line, s.text)
        if s.kind in STALL_WHEN_SERVING and (ready is None or s.line < ready)
        else s
        for s in signatures
    ]
    return StartupFacts(**facts, signatures=tuple(signatures), line_count=len(lines), text=text)


def _read_facts(msg: str, number: int, facts: dict[str, Any]) -> None:
    if facts.get("vllm_version") is None:
        match = (
            _VERSION.search(msg) if "version" in msg and "█" in msg else _OLD_VERSION.search(msg)
        )
        if match:
            facts["vllm_version"], facts["version_line"] = match.group(1), number
    if msg.lstrip().startswith(("█", "▀")) and " model " in msg and "model" not in facts:
        facts["model"] = msg.split(" model ", 1)[1].strip()
    if msg.startswith("non-default args:") and "non_default_args" not in facts:
        facts["non_default_args"] = parse_python_dict(msg.partition(":")[2].strip())
        facts["args_line"] = number
    elif (engine := _ENGINE.search(msg)) and "engine_config" not in facts:
        facts["engine_config"] = parse_config_pairs(engine.group(2))
        facts["engine_line"] = number
        facts.setdefault("vllm_version", engine.group(1))
        facts.setdefault("version_line", number)
    elif (kv := _KV.search(msg)) is not None:
        facts["kv_cache_device"] = kv.group(1)
        facts["kv_cache_tokens"] = int(kv.group(2).replace(",", ""))
        facts["kv_cache_line"] = number
        if kv.group(4):
            facts["max_concurrency"] = float(kv.group(4))
    elif (conc := _CONCURRENCY.search(msg)) is not None:
        facts["max_concurrency"] = float(conc.group(2))
    elif msg.startswith("Resolved architecture:"):
        facts["architecture"] = msg.split(":", 1)[1].strip()
    elif (load := _MODEL_LOAD.search(msg)) is not None:
        facts["model_load_gib"] = float(load.group(1))
        facts.setdefault("weights_load_s", float(load.group(2)))
    elif '"auto" tool choice has been enabled' in msg:
        facts["auto_tool_choice"] = True
    elif (mode := _MAMBA_MODE.search(msg)) is not None:
        facts["mamba_cache_mode"] = mode.group(1)
    elif (mamba := _MAMBA_PREFIX.search(msg)) is not None:
        facts["mamba_prefix_caching"] = mamba.group(1) == "enabled"
    elif "Starting vLLM server on" in msg or "Application startup complete" in msg:
        facts.setdefault("ready_line", number)
    else:
        for key, regex in _NUMBER_AFTER.items():
            if (found := regex.search(msg)) is not None:
                value = found.group(1)
                facts[key] = float(value) if "." in value else int(value)
                break


def parse_python_dict(text: str) -> dict[str, Any]:
    """vLLM prints non-default args as a Python dict repr; objects inside become strings."""
    try:
        value = ast.literal_eval(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        pass
    pairs = re.findall(r"'(\w+)': ('[^']*'|\"[^\"]*\"|True|False|None|-?[\d.]+|\[[^\]]*\])", text)
    out: dict[str, Any] = {}
    for key, raw in pairs:
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def parse_config_pairs(text: str) -> dict[str, str]:
    """Top-level `key=value` pairs of the engine config line (nested values kept as text)."""
    out: dict[str, str] = {}
    depth, start, quote = 0, 0, ""
    for index, char in enumerate(text + ","):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            key, sep, value = text[start:index].strip().partition("=")
            if sep and key.isidentifier():
                out[key] = value.strip().strip("'\"")
            start = index + 1
    return out


def explain(signature: Signature) -> str:
    """The meaning of a signature kind, for summaries."""
    for pattern in PATTERNS:
        if pattern.kind == signature.kind:
            return pattern.meaning
    return signature.kind
