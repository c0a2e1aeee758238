"""Issue 17 §5: errors the server logged while serving are attributed to the checks whose
requests were in flight, as corroborating evidence; a status never changes because of them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from golive.bundle.layout import SERVER_LOG
from golive.evidence.runtime_log import Span, corroborate, runtime_errors
from golive.results import CheckClass, CheckResult, Status

DATA = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x2"
AT = datetime(2026, 11, 30, 13, 53, 17, tzinfo=UTC).timestamp()


def _agent_check() -> CheckResult:
    return CheckResult(
        "agent.one_arg.required",
        CheckClass.AGENT,
        True,
        Status.FAIL,
        "one_arg.required: 0/6 passed; most often arguments.not_json",
        {"pass_rate": 0.0},
        ("requests/agent.one_arg.required.jsonl",),
    )


def test_a_tool_parser_traceback_on_the_h200_is_one_error_with_its_exception() -> None:
    """A tool-parser traceback from the H200 log is one error with its source, message, exception
    and time."""
    text = (DATA / "runtime-tool-parser-error.log").read_text()
    errors = runtime_errors(text, 2026, UTC)
    assert len(errors) == 1  # fourteen ERROR lines, one traceback
    error = errors[0]
    assert error.source == "hermes_tool_parser.py:117"
    assert error.message == "Error in extracting tool call from response."
    assert error.exception == (
        "json.decoder.JSONDecodeError: Unterminated string starting at: line 3 column 1 (char 51)"
    )
    assert error.at == AT
    assert error.line == 1


def test_errors_before_the_server_was_ready_are_startup_not_serving() -> None:
    """Errors logged before the server was ready belong to startup, not to any request."""
    startup = (DATA / "startup.log").read_text()
    lines = startup.splitlines(keepends=True)
    ready = next(i for i, line in enumerate(lines) if "Starting vLLM server on" in line)
    loading = "(EngineCore pid=9) ERROR 11-30 13:40:00 [core.py:1] something while loading\n"
    noisy = "".join([*lines[:ready], loading, *lines[ready:]])
    assert runtime_errors(noisy, 2026, UTC) == []
    assert len(runtime_errors(loading, 2026, UTC)) == 1  # with no ready line, it would count
    runtime = (DATA / "runtime-tool-parser-error.log").read_text()
    errors = runtime_errors(noisy + runtime, 2026, UTC)
    assert [e.source for e in errors] == ["hermes_tool_parser.py:117"]


def test_the_error_corroborates_the_check_whose_requests_were_in_flight() -> None:
    """A serving error is attributed to the check whose tool-parsing request was in flight that
    second, and to no other."""
    errors = runtime_errors((DATA / "runtime-tool-parser-error.log").read_text(), 2026, UTC)
    spans = [
        Span("agent.one_arg.required", "agent-one_arg.required-required-3", AT - 0.4, AT + 0.2),
        Span("agent.one_arg.required.engine", "agent-one_arg.required-required-3", AT, AT + 0.3),
        Span("capacity-sustained", "capacity-c64-17", AT - 300, AT - 299),
        # the same second, but tool_choice none: the tool parser never read its answer
        Span("cache", "cache-warm-3", AT + 0.1, AT + 0.15, parses_tools=False),
        # finished before the second the error was stamped with
        Span("agent.no_call", "agent-no_call-required-1", AT - 0.9, AT - 0.05),
        Span("smoke", "text", AT + 30, AT + 31),
    ]
    sustained = CheckResult(
        "capacity.sustained", CheckClass.CAPACITY, True, Status.PASS, "stable", {}, ()
    )
    checks, rows = corroborate([_agent_check(), sustained], errors, spans)
    agent, untouched = checks
    assert agent.status is Status.FAIL  # evidence, not a new verdict
    assert "the server logged 1 error(s) while these requests were in flight" in agent.summary
    assert "hermes_tool_parser.py:117" in agent.summary
    assert "Unterminated string" in agent.summary
    assert agent.measurements["server_log_errors"] == 1
    assert SERVER_LOG in agent.evidence
    assert untouched == sustained
    assert rows[0]["checks"] == ["agent.one_arg.required"]
    assert set(rows[0]["in_flight"]) == {"agent-one_arg.required-required-3"}


def test_an_error_with_nothing_in_flight_is_kept_but_blames_no_check() -> None:
    """An error with no request in flight is kept in the bundle but blames no check."""
    errors = runtime_errors((DATA / "runtime-tool-parser-error.log").read_text(), 2026, UTC)
    far = [Span("agent.one_arg.required", "a", AT + 60, AT + 61)]
    checks, rows = corroborate([_agent_check()], errors, far)
    assert checks == [_agent_check()]
    assert rows[0]["checks"] == []


def test_an_error_during_the_probe_after_load_is_the_probes() -> None:
    """The real H200 serving error, logged while the cache proof's probe after the sustained
    window was in flight, is put on `cache.after_load`, not on the proof (`cache.prefix_reuse`)
    whose requests share its stream."""
    errors = runtime_errors((DATA / "runtime-tool-parser-error.log").read_text(), 2026, UTC)
    probe = [Span("cache", "cache-after-load", AT - 0.2, AT + 0.2)]
    _, rows = corroborate([], errors, probe)
    assert rows[0]["checks"] == ["cache.after_load"]
