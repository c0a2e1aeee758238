"""The GPU tier (issue 17 §8): the programme against a real vLLM on a GPU host.

Skipped unless `GOLIVE_GPU_TARGET=http://…` names a running vLLM on a GPU (loopback only) and
`GOLIVE_GPU_LOG` its server log; `GOLIVE_GPU_HOST_INFO` / `GOLIVE_GPU_CONTAINER_INFO` may name
`golive env collect` output from that host; `GOLIVE_GPU_CONCURRENCY`, `…_DURATION`, `…_REPEAT` and
`…_MAX_CONTEXT` size the run, and `GOLIVE_GPU_KEEP` names a folder the bundle is copied to (to
keep it as test data). The assertions do not depend on the model's
quality (the recipe in ../shared/gpu serves random weights): the version chain, the KV cache
parse, memory curves from NVML, capacity windows that carried their load for their whole
duration, reuse proven on the engine's counters, every request recorded, a small bundle, and no
limit without the failing measurement behind it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from golive.bundle.store import read_lines, record_streams, verify
from golive.orchestration.rederive import rederive

URL = os.environ.get("GOLIVE_GPU_TARGET", "")
LOG = os.environ.get("GOLIVE_GPU_LOG", "")
MAX_BUNDLE_BYTES = 20_000_000

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not URL, reason="GOLIVE_GPU_TARGET is not set: no GPU vLLM to test"),
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `golive run` against the GPU engine at a load a fast engine makes meaningful."""
    assert urlparse(URL).hostname in ("127.0.0.1", "localhost", "::1"), "loopback targets only"
    assert LOG, "GOLIVE_GPU_LOG must name the server's log (the version chain needs it)"
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    argv = [
        sys.executable, "-m", "golive", "run", "--target", URL, "--log", LOG,
        "--concurrency", os.environ.get("GOLIVE_GPU_CONCURRENCY", "32"),
        "--duration", os.environ.get("GOLIVE_GPU_DURATION", "30"),
        # the device is lent for minutes: a short window, judged without the 10-minute floor
        "--min-sustained", "0", "--min-completions", "1",
        "--repeat", os.environ.get("GOLIVE_GPU_REPEAT", "2"), "--out", str(out), "--json",
    ]  # fmt: skip
    for env, flag in (
        ("GOLIVE_GPU_HOST_INFO", "--host-info"),
        ("GOLIVE_GPU_CONTAINER_INFO", "--container-info"),
    ):
        if os.environ.get(env):
            argv += [flag, os.environ[env]]
    if os.environ.get("GOLIVE_GPU_MAX_CONTEXT"):
        argv += ["--max-context", os.environ["GOLIVE_GPU_MAX_CONTEXT"]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1500, check=False)
    assert (out / "verdict.json").exists(), done.stderr[-4000:]
    if os.environ.get("GOLIVE_GPU_KEEP"):
        shutil.copytree(out, Path(os.environ["GOLIVE_GPU_KEEP"]) / "bundle", dirs_exist_ok=True)
    return out


def _verdict(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundle / "verdict.json").read_text())
    return data


def _checks(bundle: Path) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in _verdict(bundle)["checks"]}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_bundle_is_intact_and_every_request_is_recorded(bundle: Path) -> None:
    """The GPU run's bundle verifies, re-derives in golive decide, and holds a record of every one
    of the 1,000+ requests sent."""
    assert verify(bundle).ok
    again = rederive(bundle)  # `golive decide`: every check judged again from the evidence
    assert again.agrees, list(again.problems)
    ledger = _checks(bundle)["golive.ledger"]
    assert ledger["status"] == "pass", ledger["summary"]
    assert ledger["measurements"]["sent"] == ledger["measurements"]["recorded"] > 1000


def test_the_version_chain_and_the_kv_cache_are_read_from_the_engine(bundle: Path) -> None:
    """The vLLM version, the KV cache size and the parallel layout are read from the GPU engine
    itself."""
    checks = _checks(bundle)
    version = checks["environment.vllm_version"]
    assert version["status"] == "pass", version["summary"]
    kv = checks["startup.kv_cache"]
    assert kv["status"] == "pass", kv["summary"]
    assert any(
        isinstance(v, (int, float)) and v > 100_000
        for k, v in kv["measurements"].items()
        if "tokens" in k
    ), kv["measurements"]
    assert checks["startup.parallel"]["status"] == "pass", checks["startup.parallel"]["summary"]


def test_memory_curves_come_from_nvml_on_the_host(bundle: Path) -> None:
    """GPU memory curves are sampled through NVML on the host, through every pressure phase."""
    header, *rows = (bundle / "memory/capacity.csv").read_text().splitlines()
    gpus = [name for name in header.split(",") if name.startswith("gpu") and "used" in name]
    assert gpus, header
    assert len(rows) > 100
    phases = {row.split(",")[1] for row in rows}
    assert {"long_input", "concurrency", "sustained"} <= phases


def test_gpu_memory_is_judged_on_the_engines_gpus(bundle: Path) -> None:
    """capacity.memory judges the GPUs NVML saw here, the engine's: each holds at least what
    the engine printed it allocated, and the headroom is what the load needed (a reservation
    of vLLM's default 0.9 is not a limit)."""
    memory = _checks(bundle)["capacity.memory"]
    assert memory["status"] in ("pass", "warn"), memory["summary"]
    m = memory["measurements"]
    gpus = json.loads((bundle / "memory/gpus.json").read_text())
    judged = [g for g in gpus if f"gpu{g['index']}_headroom" in m]
    assert judged, m
    for gpu in judged:
        assert m[f"gpu{gpu['index']}_peak_mib"] >= m["allocated_per_gpu_mib"]
        assert m[f"gpu{gpu['index']}_total_mib"] == gpu["memory_total_mib"]


def test_every_capacity_window_carried_its_load_for_its_whole_duration(bundle: Path) -> None:
    """At GPU speed every load window ran its whole duration under its request cap, with golive
    never the bottleneck."""
    windows = _jsonl(bundle / "metrics/capacity-watchdog.jsonl")
    assert windows
    loaded = [w for w in windows if w["phase"] in ("concurrency", "sustained")]
    for window in loaded:
        assert window["stopped_by"] == "duration", window
        assert window["wall_s"] >= window["duration_s"] * 0.95, window
        assert window["requests"] < window["request_cap"], window
    sustained = _checks(bundle)["capacity.sustained"]["measurements"]
    assert all(float(w) > 0 for w in sustained["window_rps"].split(", ")), sustained
    # and golive itself was not the bottleneck in any of them
    headroom = _checks(bundle)["golive.client_headroom"]
    assert headroom["status"] == "pass", headroom["summary"]


def test_no_limit_without_the_measurement_behind_it(bundle: Path) -> None:
    """A concurrency or context limit in the verdict always has a measured step beyond it."""
    verdict = _verdict(bundle)
    limit = verdict["limits"].get("max_concurrency")
    steps = _jsonl(bundle / "metrics/capacity-steps.jsonl")
    if limit is not None:
        above = [s for s in steps if s["concurrency"] > limit]
        assert above, "a concurrency limit with no step measured above it"
    context = verdict["limits"].get("max_context")
    if context is not None:
        measured = _checks(bundle)["capacity.long_input"]["measurements"]
        rejected = [
            int(k.removeprefix("step_"))
            for k, v in measured.items()
            if k.startswith("step_") and v != "accepted"
        ]
        assert rejected, "a context limit with no rejected input behind it"
        assert min(rejected) > context


def test_cache_reuse_is_proven_on_the_engine_counters(bundle: Path) -> None:
    """Prefix reuse on the GPU engine is shown by its own counters, with the warm-up step reusing
    nothing."""
    reuse = _checks(bundle)["cache.prefix_reuse"]
    assert reuse["status"] == "pass", reuse["summary"]
    m = reuse["measurements"]
    assert m["warm_engine_reused_min"] >= m["block_size"]
    steps = _jsonl(bundle / "metrics/cache-steps.jsonl")
    assert steps[0]["step"] == "warmup"
    assert steps[0]["d_hits"] == 0


def test_the_bundle_stays_small_at_gpu_speed(bundle: Path) -> None:
    """Thousands of requests a minute still leave a bundle under the size cap: capacity streams
    compressed, most bodies sampled out, failures kept whole."""
    verdict = _verdict(bundle)
    assert verdict["bundle_bytes"] < MAX_BUNDLE_BYTES, verdict["bundle_bytes"]
    streams = record_streams(bundle, "capacity-*")
    assert streams
    assert all(p.name.endswith(".jsonl.zst") for p in streams), streams
    lines = [json.loads(line) for p in streams for line in read_lines(p)]
    slim = [r for r in lines if r.get("body") == "sampled-out"]
    assert slim, "no capacity record was slimmed"
    assert all(r["timings_ms"]["end"] is not None for r in slim)
    assert all(r["http_status"] == 200 for r in slim)  # failures always keep their bodies
