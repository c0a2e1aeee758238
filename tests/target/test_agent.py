"""`golive agent` on the real CPU vLLM: Qwen + hermes (required/named pass, auto writes the
call into content), and gateways in front of the real engine whose defects must be blamed on
the right layer. The weak model's schema failures are test_smollm2_server.py's."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import Bundle, verify
from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.rules import Layer
from golive.checks.agent.select import cases_for
from golive.checks.context import CheckContext
from golive.cli.main import main
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.orchestration.rederive import rederive
from golive.profiles import load_profile
from golive.results import CheckResult, Outcome
from golive.target.server import RunningTarget
from tests.helpers.fakes.gateway import hedging_gateway, rewriting_gateway


async def _cli(url: str, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = await asyncio.to_thread(
        main,
        ["agent", "--target", url, "--out", str(out), "--temperature", "0", "--json", *extra],
    )
    return code, json.loads((out / "verdict.json").read_text())


def _checks(verdict: dict[str, Any]) -> dict[str, Any]:
    return {c["id"]: c for c in verdict["checks"]}


def _examples(out: Path) -> list[dict[str, Any]]:
    lines = (out / "requests/agent-failures.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


@pytest.mark.tampers_bundle  # it edits a copy of its bundle: decide must catch that
async def test_qwen_required_and_named_pass_auto_writes_every_call_into_content(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """On the real Qwen, required and named tool calls pass while tool_choice=auto writes the call
    into content in every run: named, blamed on the model or parser, and — failing in more than
    agent.max_bounded_failure_share (20%) of its runs — not a known, bounded defect: hold."""
    out = tmp_path / "b"
    cases = ("one_arg.required", "one_arg.named", "one_arg.auto", "retry")
    code, verdict = await _cli(
        real_target.url,
        out,
        "--repeat",
        "2",
        "--concurrency",
        "8",
        *(x for c in cases for x in ("--case", c)),
    )
    checks = _checks(verdict)
    assert code == Outcome.HOLD.exit_code, checks
    for name in ("agent.one_arg.required", "agent.one_arg.named"):
        assert checks[name]["status"] == "pass", checks[name]["summary"]
        assert checks[name]["measurements"]["runs"] == 4
    auto = checks["agent.one_arg.auto"]
    assert auto["status"] == "fail"
    assert auto["critical"] is True
    assert "failing in 100% of its runs, more than the 20%" in auto["summary"]
    assert auto["measurements"]["passed"] == 0
    assert auto["measurements"]["signatures"] == "tool_calls.empty.call_in_content x4"
    assert auto["measurements"]["layer"] == Layer.MODEL_OR_PARSER.value
    assert "disable_features" not in verdict["limits"]  # not bounded: no feature limit
    held = {r["rule"]: r["checks"] for r in verdict["rules_fired"]}
    assert held["agent-protocol-failure"] == ["agent.one_arg.auto"]
    examples = _examples(out)
    assert {e["mode"] for e in examples} == {"stream", "plain"}
    assert all('"get_weather"' in e["message"]["content"] for e in examples)
    retry = checks["agent.retry"]
    # a CI run once found 2 of 4 attempts holding their whole call at the deadline (cause not
    # seen): a failure shows each attempt's timeline against the deadline to find it
    assert retry["status"] == "pass", (
        retry["summary"],
        retry["measurements"].get("client_deadline_s"),
        _retry_timeline(out),
    )
    m = retry["measurements"]
    assert m["timeouts_exercised"] == 4, (m, _retry_timeline(out))
    # two reference answers, then four attempts given up and their four retries
    assert m["engine_admitted"] == m["attempts_sent"] == 10
    lines = (out / "requests/agent.retry.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    timeouts = [r for r in records if (r.get("failure") or {}).get("kind") == "timeout"]
    assert len(timeouts) == 4
    report = (out / "report.md").read_text()
    assert "not bounded" in report
    assert verify(out).ok
    _rederives_and_catches_an_edited_answer(out, tmp_path / "edited")


def _retry_timeline(out: Path) -> list[str]:
    """Each retry-case record: its first token, end, chunk count and last chunk (ms), its
    failure, and what it said (a stream's content and argument pieces, joined). Never raises:
    it only explains a failure."""
    try:
        return _timeline_lines(out)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"(the retry timeline could not be read: {exc!r})"]


def _timeline_lines(out: Path) -> list[str]:
    lines = []
    for line in (out / "requests/agent.retry.jsonl").read_text().splitlines():
        record = json.loads(line)
        timings = record["timings_ms"]
        chunks = timings.get("chunks") or []
        said = str(record.get("response"))[:300]
        if record.get("response_raw"):
            said = "".join(_pieces(record["response_raw"]))
        lines.append(
            f"{record['label']}: first token {timings.get('first_token')}, end "
            f"{timings.get('end')}, {len(chunks)} chunks (last {chunks[-1] if chunks else None}),"
            f" failure {(record.get('failure') or {}).get('kind')}: {said!r}"
        )
    return lines


def _pieces(sse: str) -> list[str]:
    """The content and tool-call argument pieces of a saved stream, in order."""
    pieces = []
    for line in sse.splitlines():
        if not line.startswith("data: {"):
            continue
        try:
            event = json.loads(line[6:])
        except ValueError:  # a stream given up on may end mid-event
            pieces.append("<cut>")
            continue
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            pieces.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                pieces.append(function.get("name") or "")
                pieces.append(function.get("arguments") or "")
    return pieces


def _rederives_and_catches_an_edited_answer(out: Path, edited: Path) -> None:
    """`golive decide` judges every case again from the saved answers and reproduces each
    check; an answer edited in the bundle (the manifest recomputed) changes the re-judged
    case: the call's required argument removed from one non-streamed answer, that answer breaks
    its schema and its streamed twin no longer carries the same call — two failures of a
    critical case, so it fails and the outcome is hold."""
    again = rederive(out)
    assert again.agrees, again.problems
    assert "agent" in again.rejudged
    assert not any(c.startswith("agent.") for c in again.as_sealed)
    shutil.copytree(out, edited)
    answers = edited / "requests/agent.one_arg.required.jsonl"
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    plain = next(x for x in lines if x["label"] == "agent-one_arg.required-plain-0")
    plain["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{}"
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines))
    Bundle(edited).seal()
    changed = rederive(edited)
    assert not any("manifest" in p for p in changed.problems), changed.problems
    assert "agent.one_arg.required status: sealed 'pass', re-derived 'fail'" in changed.problems
    assert "agent.one_arg.required measurements.passed: sealed 4, re-derived 2" in changed.problems
    assert changed.decision.outcome is Outcome.HOLD


async def _gateway_run(
    gateway: str, engine: str | None, out: Path, cases: tuple[str, ...], repeat: int
) -> dict[str, CheckResult]:
    config = load_config(
        None,
        {
            "target.url": gateway,
            "target.engine_url": engine,
            "agent.cases": list(cases),
            "agent.repeat": repeat,
            "agent.temperature": 0.0,
            "agent.concurrency": 8,
        },
    )
    settings = AgentSettings.from_config(
        config, cases_for(config.agent, load_profile(config.profile))
    )

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_agent(ctx, settings)

    verdict = await judge(config, out, "agent", programme, ("agent",))
    checks = {c.id: c for c in verdict.document.results()}
    # a section without its cases' checks lost them (no served model through the gateway, an
    # internal error): say which, with every check's summary, not a bare KeyError
    lost = [f"agent.{case}" for case in cases if f"agent.{case}" not in checks]
    assert not lost, (lost, {i: f"{c.status.value}: {c.summary}" for i, c in checks.items()})
    assert verdict.outcome is Outcome.HOLD
    return checks


async def test_gateway_rewriting_arguments_is_blamed_on_the_gateway(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """A gateway that rewrites tool-call arguments is blamed on the gateway: the engine's own
    answers are clean."""
    async with rewriting_gateway(real_target.url) as gateway:
        checks = await _gateway_run(
            gateway, real_target.url, tmp_path / "b", ("one_arg.required",), 2
        )
    result = checks["agent.one_arg.required"]
    assert result.status.value == "fail", result.summary  # no_data says what was not sent
    assert result.measurements["layer"] == Layer.GATEWAY.value
    assert "arguments.schema x2" in str(result.measurements["signatures"])
    assert "stream.parity x2" in str(result.measurements["signatures"])  # the stream was untouched
    assert result.measurements["stream_passed"] == 0
    examples = _examples(tmp_path / "b")
    assert all(e["engine_findings"] == [] for e in examples if e["mode"] == "plain")
    # both sends asked the real engine for the prompt it rendered, and it answered with it:
    # held by the prompt itself (the same both ways), not by its count
    for stream in ("agent.one_arg.required", "agent.one_arg.required.engine"):
        saved = (tmp_path / f"b/requests/{stream}.jsonl").read_text()
        assert saved.count('"prompt_token_ids"') >= 4, stream
    assert "gateway.request_rewritten" not in str(result.measurements["signatures"])


async def test_hedging_gateway_is_blamed_on_idempotency(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """A gateway that re-sends requests behind the client's back: the engine's own counters
    show more requests than the client sent."""
    async with hedging_gateway(real_target.url) as gateway:
        checks = await _gateway_run(gateway, real_target.url, tmp_path / "b", ("retry",), 1)
    result = checks["agent.retry"]
    assert result.status.value == "fail", result.summary
    assert result.measurements["layer"] == Layer.IDEMPOTENCY.value
    admitted = result.measurements["engine_admitted"]
    sent = result.measurements["attempts_sent"]
    assert isinstance(admitted, int)
    assert isinstance(sent, int)
    assert admitted > sent
    assert "retry.hidden_retries" in str(result.measurements["signatures"])
