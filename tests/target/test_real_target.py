"""golive against a real vLLM server (CPU build) — the behaviour users will see."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import Bundle, verify
from golive.checks.smoke.collect import run_smoke
from golive.config import GoliveConfig
from golive.config_sources import load_config
from golive.errors import LocalTargetError, TargetNotMeasurable
from golive.metrics import MetricsDelta, parse_metrics
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.results import Outcome
from golive.target.install import ensure_target
from golive.target.server import RunningTarget, ServeOptions, start_target
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.records import RequestRecord, parse
from golive.traffic.schedule import Schedule, run_schedule


def _config(target: RunningTarget, **overrides: str) -> GoliveConfig:
    """Short answers keep the suite fast on 2 CPU cores; the checks are the same."""
    return load_config(
        None,
        {"target.url": target.url, "smoke.max_tokens": 16, "smoke.classes": False, **overrides},
    )


def _checks(data: dict[str, Any]) -> dict[str, Any]:
    return {str(c["id"]): c for c in data["checks"]}


@pytest.mark.tampers_bundle  # it edits a copy of its bundle: decide must catch that
async def test_smoke_on_real_vllm_is_section_passed_and_sealed(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """Every smoke check passes on the real engine, with real numbers, in a sealed bundle;
    a section that passed is `section-passed`, never go-live."""
    out = tmp_path / "bundle"
    verdict = await judge(_config(real_target), out, "smoke", run_smoke, ("smoke",))
    checks = _checks(verdict.data)
    assert verdict.outcome is Outcome.SECTION_PASSED, checks
    assert verdict.data["scope"] == ["smoke"]
    assert checks["smoke.version"]["measurements"]["vllm_version"] == "0.32.0"
    assert checks["smoke.models"]["measurements"]["max_model_len"] == 4096
    stream = checks["smoke.text_stream"]["measurements"]
    assert 0 < stream["ttft_ms"] < stream["e2e_ms"]
    # Tokens arrive as separate events (how many network reads carry them is up to TCP).
    assert stream["token_events"] > 1
    metrics = checks["smoke.metrics"]["measurements"]
    assert metrics["request_success_delta"] >= 2
    assert metrics["enable_prefix_caching"] == "True"
    assert verify(out).ok
    # Every request of the smoke class is saved with status, timings and the server's id.
    lines = [json.loads(x) for x in (out / "requests/smoke.jsonl").read_text().splitlines()]
    chats = [x for x in lines if x["label"].startswith("smoke.text")]
    assert len(chats) == 2
    for line in chats:
        assert line["http_status"] == 200
        assert line["server_request_id"]
        assert line["timings_ms"]["end"] > 0
        assert line["response"]["choices"][0]["message"]["content"]
    # golive decide judges every smoke check again from the saved answers and scrapes; an
    # answer edited in the bundle (manifest recomputed) changes the re-judged check
    again = rederive(out)
    assert again.agrees, again.problems
    assert {"smoke.version", "smoke.metrics"} <= set(again.rejudged_ids)
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    for line in lines:
        if line["label"] == "version":
            line["response"] = {"version": "custom build"}
    (edited / "requests/smoke.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    Bundle(edited).seal()
    changed = rederive(edited)
    assert "smoke.version status: sealed 'pass', re-derived 'fail'" in changed.problems


async def test_editing_any_file_breaks_verify(real_target: RunningTarget, tmp_path: Path) -> None:
    """One changed byte in any file of a real bundle makes verify fail and name the file."""
    out = tmp_path / "bundle"
    await judge(_config(real_target), out, "smoke", run_smoke, ("smoke",))
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "manifest-sha256.txt")
    assert len(files) >= 6
    for path in files:
        original = path.read_bytes()
        path.write_bytes(bytes([original[0] ^ 0x20]) + original[1:])
        report = verify(out)
        assert report.altered == (path.relative_to(out).as_posix(),)
        path.write_bytes(original)
    assert verify(out).ok


async def test_wrong_model_on_real_vllm_is_not_measurable(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """Asking the real server for a model it does not serve stops in preflight, naming the
    served model and the fix; no bundle is written."""
    config = _config(real_target, **{"target.model": "kimi-k3"})
    with pytest.raises(TargetNotMeasurable) as info:
        await judge(config, tmp_path / "b", "smoke", run_smoke, ("smoke",))
    assert f"the server serves {real_target.served_name}, not target.model 'kimi-k3'" in str(
        info.value
    )
    assert not (tmp_path / "b").exists()


async def test_metrics_url_that_is_not_metrics(real_target: RunningTarget, tmp_path: Path) -> None:
    """A metrics URL that answers JSON (here /v1/models) gives no_data, never a pass."""
    config = _config(real_target, **{"target.metrics_url": f"{real_target.url}/v1/models"})
    verdict = await judge(config, tmp_path / "b", "smoke", run_smoke, ("smoke",))
    metrics = _checks(verdict.data)["smoke.metrics"]
    assert metrics["status"] == "no_data"
    assert verdict.outcome is Outcome.HOLD


async def test_streamed_tool_call_matches_the_non_streamed_one(real_target: RunningTarget) -> None:
    """Real hermes tool-call deltas reassemble into the same call the non-streamed API gives."""
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    body = {
        "model": real_target.served_name,
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "tools": [tool],
        "tool_choice": "required",
        "max_tokens": 64,
        "temperature": 0,
    }
    async with TargetClient(ClientSettings(real_target.url)) as client:
        plain = parse(await client.chat(body, "tool"))
        streamed = parse(await client.chat({**body, "stream": True}, "tool-stream"))
    assert plain.completion is not None
    assert streamed.stream is not None
    assert not streamed.problems
    call = plain.completion["choices"][0]["message"]["tool_calls"][0]["function"]
    assert len(streamed.stream.tool_calls) == 1
    streamed_call = streamed.stream.tool_calls[0]
    assert streamed_call.name == call["name"] == "get_weather"
    assert json.loads(streamed_call.arguments) == json.loads(call["arguments"])
    assert "city" in json.loads(streamed_call.arguments)
    assert len(streamed.record.chunks) > 2


def test_console_script_smoke_with_every_request_class(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """The installed `golive smoke` runs every post-start request class on the real engine,
    prints JSON, exits 0 and leaves a bundle verify accepts."""
    out = tmp_path / "cli"
    config = tmp_path / "golive.yaml"
    config.write_text(
        "smoke:\n  max_tokens: 16\n  long_context_fraction: 0.2\n  concurrent_sessions: 2\n"
        "  sustained_s: 8\n  shared_prompt_repeats: 2\n"
    )
    golive = Path(sys.executable).with_name("golive")
    run = subprocess.run(
        [
            str(golive),
            "smoke",
            "--target",
            real_target.url,
            "--config",
            str(config),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    verdict = json.loads(run.stdout)
    checks = _checks(verdict)
    assert run.returncode == 0, [(c["id"], c["summary"]) for c in verdict["checks"]]
    assert verdict["outcome"] == "section-passed"
    assert verdict["sections_missing"] == ["env", "capacity", "cache", "agent"]
    assert checks["smoke.long_context"]["measurements"]["prompt_tokens"] > 700
    assert checks["smoke.multimodal"]["status"] == "skipped"
    assert checks["smoke.tools_structured"]["measurements"]["tool_calls"] >= 1
    shared = checks["smoke.shared_prompt"]["measurements"]
    assert shared["cached_tokens_1"] is None  # the default server does not report it
    assert abs(shared["prompt_tokens_0"] - shared["prompt_tokens_1"]) <= 8
    assert checks["smoke.concurrent_sessions"]["measurements"]["requests"] == 2
    assert checks["smoke.sustained"]["measurements"]["failed"] == 0
    verified = subprocess.run(
        [str(golive), "verify", str(out)], capture_output=True, text=True, check=False
    )
    assert verified.returncode == 0
    assert "intact" in verified.stdout


async def test_concurrent_schedule_through_one_pool(real_target: RunningTarget) -> None:
    """Eight requests at concurrency 4: all answered, overlapping in time, and the engine's
    own counter agrees that exactly eight finished."""
    async with TargetClient(ClientSettings(real_target.url)) as client:

        async def send(body: Mapping[str, Any], label: str, scheduled_ns: int) -> RequestRecord:
            return await client.chat(body, label, scheduled_ns)

        before = parse_metrics((await client.get("/metrics", "m")).raw_text)
        result = await run_schedule(
            Schedule("concurrency", duration_s=240, max_requests=8, concurrency=4),
            send,
            lambda n: {
                "model": real_target.served_name,
                "messages": [{"role": "user", "content": f"Count to {n + 3}."}],
                "max_tokens": 8,
                "stream": True,
            },
            "burst",
        )
        after = parse_metrics((await client.get("/metrics", "m")).raw_text)
    assert result.stopped_by == "request_cap"
    assert len(result.records) == 8
    parsed = [parse(r) for r in result.records]
    assert all(p.record.ok and not p.problems for p in parsed)
    spans = sorted((r.timings.sent_ns, r.timings.end_ns or 0) for r in result.records)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    assert MetricsDelta(before, after).counter("request_success") == 8


async def test_failed_start_points_at_the_server_log(tmp_path: Path) -> None:
    """A server that cannot start is reported with the log path and its last lines."""
    paths = await ensure_target("qwen")
    options = ServeOptions(extra_args=("--no-such-flag",), ready_timeout_s=180)
    with pytest.raises(LocalTargetError) as info:
        await start_target(paths, options, tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message
    assert "no-such-flag" in message


def test_on_a_small_host_the_engine_runs_below_golive(real_target: RunningTarget) -> None:
    """On a host of 2 cores or fewer the bundled engine and golive's load client share every
    core; the engine (its API server and the engine process it forks) runs at niceness 5 so
    the client is served first, and the PID golive stops is the server's own."""
    cpus = len(os.sched_getaffinity(0))
    expected = 5 if cpus <= 2 else os.getpriority(os.PRIO_PROCESS, 0)
    tree = [real_target.pid, *_children(real_target.pid)]
    assert len(tree) >= 2, tree  # the API server and its engine core process
    for pid in tree:
        assert os.getpriority(os.PRIO_PROCESS, pid) == expected, pid
    cmdline = Path(f"/proc/{real_target.pid}/cmdline").read_bytes().split(b"\0")
    assert b"vllm" in b" ".join(cmdline)
    assert cmdline[0] != b"nice"


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_children(int(child))]
    return found
