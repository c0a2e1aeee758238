"""Bad targets become clear check results and a readable, sealed bundle — never a traceback."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from golive.bundle.store import Bundle, verify
from golive.checks.smoke.collect import run_smoke
from golive.cli.main import main
from golive.config_sources import load_config
from golive.errors import TargetNotMeasurable
from golive.orchestration.pipeline import Verdict, judge
from golive.orchestration.rederive import rederive
from golive.results import EXIT_NOT_MEASURABLE, Outcome, Status
from tests.helpers.fakes.gateway import (
    ALIAS,
    aliasing_gateway,
    injecting_gateway,
    relaying_gateway,
    rewriting_gateway,
    strict_gateway,
    swapping_gateway,
)
from tests.helpers.fakes.vllm import MODEL, FakeState, fake_vllm
from tests.helpers.scenario import TEXT_ONLY


async def _smoke(url: str, out: Path, **overrides: object) -> Verdict:
    settings = {"target.url": url, **TEXT_ONLY, **overrides}
    return await judge(load_config(None, settings), out, "smoke", run_smoke, ("smoke",))


def _status(verdict: Verdict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in verdict.data["checks"]}


def _summary(verdict: Verdict, check_id: str) -> str:
    return next(str(c["summary"]) for c in verdict.data["checks"] if c["id"] == check_id)


async def test_healthy_fake_is_section_passed_never_go_live(tmp_path: Path) -> None:
    """The control case: a well-behaved server passes every smoke check — and that is a
    section, not a decision ("A running process or one successful request is not enough")."""
    async with fake_vllm(FakeState()) as url:
        verdict = await _smoke(url, tmp_path / "b")
    assert verdict.outcome is Outcome.SECTION_PASSED, verdict.data["checks"]
    assert verdict.outcome.exit_code == 0
    assert set(_status(verdict).values()) == {"pass"}
    assert verdict.data["scope"] == ["smoke"]
    assert verdict.data["sections_missing"] == ["env", "capacity", "cache", "agent"]
    assert [r["rule"] for r in verdict.data["rules_fired"]] == ["section-only"]
    assert verify(tmp_path / "b").ok


async def test_a_version_that_is_not_a_version_fails(tmp_path: Path) -> None:
    """A /version answer that is not a package version fails smoke.version, and the section holds."""
    async with fake_vllm(FakeState(fault="odd_version")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    assert _status(verdict)["smoke.version"] == "fail"
    assert "not a package version" in _summary(verdict, "smoke.version")
    assert verdict.outcome is Outcome.HOLD


async def test_unreachable_target_is_not_measurable(tmp_path: Path) -> None:
    """Connection refused: preflight stops before any bundle, naming the URL and the fix
    (issue 30 §1: a target that cannot be measured is not a `hold` about a deployment)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TargetNotMeasurable, match="could not be reached"):
        await _smoke(f"http://127.0.0.1:{port}", tmp_path / "b")
    assert not (tmp_path / "b").exists()


async def test_server_that_is_not_vllm(tmp_path: Path) -> None:
    """/version 404 and HTML metrics: version fails, metrics are no_data with the reason."""
    async with fake_vllm(FakeState(fault="not_vllm")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    status = _status(verdict)
    assert status["smoke.version"] == "fail"
    assert "is this a vLLM server" in _summary(verdict, "smoke.version")
    assert status["smoke.metrics"] == "no_data"
    assert "not Prometheus text" in _summary(verdict, "smoke.metrics")
    assert verdict.outcome is Outcome.HOLD
    # The raw HTML is kept as evidence of what the metrics URL returned.
    assert "<html>" in (tmp_path / "b/metrics/smoke-before.prom").read_text()


async def test_metrics_that_do_not_count_our_traffic(tmp_path: Path) -> None:
    """A metrics URL whose counters never move (wrong engine, a router) fails the check."""
    async with fake_vllm(FakeState(fault="stale_metrics")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    assert _status(verdict)["smoke.metrics"] == "fail"
    assert "does not describe the engine" in _summary(verdict, "smoke.metrics")


async def test_a_4xx_is_a_configuration_finding_naming_the_field(tmp_path: Path) -> None:
    """Failures are classified before they are judged: a 400 for a request field the server
    does not enable names the field and quotes the server; it is configuration, not load."""
    async with fake_vllm(FakeState(fault="no_structured")) as url:
        verdict = await _smoke(url, tmp_path / "b", **{"smoke.classes": True})
    summary = _summary(verdict, "smoke.tools_structured")
    assert _status(verdict)["smoke.tools_structured"] == "fail"
    assert "refused it as configured (HTTP 400, field 'response_format')" in summary
    assert "json_schema is not supported by this server" in summary
    assert verdict.outcome is Outcome.HOLD


async def test_wrong_model_name(tmp_path: Path) -> None:
    """A model the server does not serve is named, with what is served, and nothing is sent
    (preflight: no bundle about a deployment that serves something else)."""
    state = FakeState()
    async with fake_vllm(state) as url:
        with pytest.raises(TargetNotMeasurable, match=f"the server serves {MODEL}, not"):
            await _smoke(url, tmp_path / "b", **{"target.model": "gpt-9"})
    assert state.chats == 0
    assert not (tmp_path / "b").exists()


async def test_answers_from_another_model_hold(tmp_path: Path) -> None:
    """A server whose every answer says another model answered (a shared endpoint, a gateway
    routing elsewhere) passes every smoke check on its own, and is held by target.identity,
    which names the models seen; golive decide judges it again from the records."""
    async with fake_vllm(FakeState(fault="other_model")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    status = _status(verdict)
    assert status["smoke.text"] == "pass"
    assert status["target.identity"] == "fail"
    summary = _summary(verdict, "target.identity")
    assert "2 of 2 answers came from another model" in summary
    assert "other-model (asked fake-model) x2" in summary
    assert verdict.outcome is Outcome.HOLD
    held = {r["rule"]: r["checks"] for r in verdict.data["rules_fired"]}
    assert "target.identity" in held["critical-failure"]


async def test_metrics_of_another_model_count_nothing(tmp_path: Path) -> None:
    """A /metrics whose series are all another model's (another engine behind the metrics
    URL) is no_data naming the models it has, even though its counters moved."""
    async with fake_vllm(FakeState(fault="other_engine_metrics")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    assert _status(verdict)["smoke.metrics"] == "no_data"
    summary = _summary(verdict, "smoke.metrics")
    assert "no series for the served model 'fake-model', only for other-model" in summary
    assert verdict.outcome is Outcome.HOLD


@pytest.mark.parametrize(
    ("fault", "phrase"),
    [
        ("truncated_stream", "without [DONE]"),
        ("malformed_stream", "not JSON"),
        ("reset_stream", "connection closed mid-answer"),
    ],
)
async def test_broken_streams_fail_the_stream_check(
    tmp_path: Path, fault: str, phrase: str
) -> None:
    """Missing [DONE], junk events and a reset connection each fail smoke.text_stream."""
    async with fake_vllm(FakeState(fault=fault)) as url:
        verdict = await _smoke(url, tmp_path / "b")
    status = _status(verdict)
    assert status["smoke.text"] == "pass"
    assert status["smoke.text_stream"] == "fail"
    assert phrase in _summary(verdict, "smoke.text_stream")
    lines = (tmp_path / "b/requests/smoke.jsonl").read_text().splitlines()
    streamed = [json.loads(line) for line in lines if json.loads(line)["stream"]]
    assert streamed
    assert streamed[0]["response_raw"].startswith("data: ")
    assert verify(tmp_path / "b").ok


async def test_http_500_is_a_failure_with_the_server_message(tmp_path: Path) -> None:
    """An HTTP 500 on the text request fails smoke.text with the server's own message."""
    async with fake_vllm(FakeState(fault="http_500")) as url:
        verdict = await _smoke(url, tmp_path / "b")
    assert _status(verdict)["smoke.text"] == "fail"
    assert "HTTP 500: EngineCore died" in _summary(verdict, "smoke.text")


async def test_hung_request_times_out(tmp_path: Path) -> None:
    """A chat request that never answers is cut by the read timeout and reported."""
    async with fake_vllm(FakeState(fault="hang")) as url:
        verdict = await _smoke(url, tmp_path / "b", **{"target.read_timeout_s": 0.5})
    assert _status(verdict)["smoke.text"] == "error"
    assert "no data for 0.5 s" in _summary(verdict, "smoke.text")


async def test_api_key_is_sent_but_never_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key from --api-key-env reaches the server, and no bundle file contains it."""
    monkeypatch.setenv("GOLIVE_TEST_KEY", "sk-live-0123456789")
    state = FakeState()
    async with fake_vllm(state) as url:
        await _smoke(url, tmp_path / "b", **{"target.api_key_env": "GOLIVE_TEST_KEY"})
    assert "Bearer sk-live-0123456789" in state.seen_auth
    for path in (tmp_path / "b").rglob("*"):
        if path.is_file():
            assert "sk-live-0123456789" not in path.read_text()


@pytest.mark.tampers_bundle
async def test_cli_exit_codes_and_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`golive smoke` exits 4 (target not measurable) on an unreachable target, writing
    nothing; 11 (hold) on a server that answers wrongly; `verify` 0 then 1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "b"
    argv = ["smoke", "--target", f"http://127.0.0.1:{port}", "--out", str(out), "--json"]
    assert await asyncio.to_thread(main, argv) == EXIT_NOT_MEASURABLE == 4
    assert not out.exists()
    capsys.readouterr()
    async with fake_vllm(FakeState(fault="odd_version")) as url:
        argv = ["smoke", "--target", url, "--out", str(out), "--json"]
        code = await asyncio.to_thread(main, argv)
    assert code == Outcome.HOLD.exit_code == 11
    printed = json.loads(capsys.readouterr().out)
    assert printed["outcome"] == "hold"
    assert await asyncio.to_thread(main, ["verify", str(out)]) == 0
    (out / "verdict.json").write_text((out / "verdict.json").read_text().replace("hold", "go-live"))
    assert await asyncio.to_thread(main, ["verify", str(out)]) == 1
    assert "altered: verdict.json" in capsys.readouterr().out


def test_cli_config_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt config key exits 2 naming the key."""
    bad = tmp_path / "c.yaml"
    bad.write_text("target:\n  urll: http://127.0.0.1:1\n")
    assert main(["smoke", "--target", "http://127.0.0.1:1", "--config", str(bad)]) == 2
    assert "target.urll" in capsys.readouterr().err


CLASSES = {  # every request class, kept short (the gateway tests)
    "smoke.classes": True,
    "smoke.sustained_s": 0.5,
    "smoke.concurrent_sessions": 2,
    "smoke.shared_prompt_repeats": 2,
}


async def test_gateway_that_rewrites_tool_arguments_is_blamed(tmp_path: Path) -> None:
    """Gateway mode: every class goes through the gateway and straight to the engine; both
    payloads are saved and the rewritten tool arguments are placed on the gateway."""
    async with fake_vllm(FakeState()) as engine, rewriting_gateway(engine) as gateway:
        verdict = await _smoke(
            gateway,
            tmp_path / "b",
            **{"target.engine_url": engine, **CLASSES},
        )
    tools = next(c for c in verdict.data["checks"] if c["id"] == "smoke.tools_structured")
    assert tools["status"] == "fail"
    assert "gateway altered the answer: tool_arguments differs" in tools["summary"]
    assert "field_0" in tools["summary"]
    lines = [
        json.loads(x)
        for x in (tmp_path / "b/requests/smoke-classes.jsonl").read_text().splitlines()
    ]
    labels = {x["label"] for x in lines}
    assert {"tools@target", "tools@engine"} <= labels
    assert verdict.outcome is Outcome.HOLD


async def test_a_gateway_that_injects_a_system_prompt_is_named(tmp_path: Path) -> None:
    """Issue 27 §4: a gateway that injects a 600-word system prompt answers well-formed text
    and tool calls; the engine's prompt tokens for the same request sent through it and sent
    directly differ, so the classes fail on the gateway."""
    change = "600 tokens added: a system prompt"
    async with fake_vllm(FakeState()) as engine, injecting_gateway(engine) as front:
        verdict = await _smoke(
            front,
            tmp_path / "b",
            **{"target.engine_url": engine, **CLASSES},
        )
    checks = {c["id"]: c for c in verdict.data["checks"]}
    named = [i for i, c in checks.items() if "the gateway rewrote the request" in c["summary"]]
    assert "smoke.tools_structured" in named, {i: c["summary"] for i, c in checks.items()}
    assert change in checks["smoke.tools_structured"]["summary"]
    assert all(checks[i]["status"] == "fail" for i in named)
    assert verdict.outcome is Outcome.HOLD


async def test_a_gateway_that_rewrites_a_message_keeping_its_length_is_named(
    tmp_path: Path,
) -> None:
    """Issue 27 §4: a gateway that swaps a word of every user message keeps the prompt's
    length, so the engine counts the same prompt tokens both ways; the prompt the engine
    rendered (vLLM's return_token_ids, asked on both sends) differs, so the classes fail on
    the gateway. An honest gateway's classes pass, held by the prompt itself, not its count."""
    async with fake_vllm(FakeState()) as engine, swapping_gateway(engine) as front:
        verdict = await _smoke(front, tmp_path / "b", **{"target.engine_url": engine, **CLASSES})
    checks = {c["id"]: c for c in verdict.data["checks"]}
    tools = checks["smoke.tools_structured"]
    assert tools["status"] == "fail", tools
    assert "as many tokens, other ones: a message rewritten" in tools["summary"]
    assert verdict.outcome is Outcome.HOLD
    assert rederive(tmp_path / "b").agrees
    async with fake_vllm(FakeState()) as engine, relaying_gateway(engine) as front:
        honest = await _smoke(front, tmp_path / "c", **{"target.engine_url": engine, **CLASSES})
    held = {c["id"]: c for c in honest.data["checks"]}["smoke.tools_structured"]
    assert held["status"] == "pass", held
    assert "by prompt-token count only" not in held["summary"]
    lines = (tmp_path / "c/requests/smoke-classes.jsonl").read_text().splitlines()
    pairs = [json.loads(line) for line in lines if "@" in json.loads(line)["label"]]
    assert pairs
    assert all(line["request"]["return_token_ids"] for line in pairs)


async def test_a_strict_gateway_is_not_blamed_for_golives_own_fields(tmp_path: Path) -> None:
    """A gateway that refuses request fields outside the OpenAI schema (400) would refuse
    every request asking vLLM for the prompt it rendered: golive's own fields, not a defect
    of the deployment. One short request finds it (saved, with the same request answered
    without the fields); the classes are then sent as they are, pass held to the engine by
    prompt-token count, and say so. decide agrees."""
    async with fake_vllm(FakeState()) as engine, strict_gateway(engine) as front:
        verdict = await _smoke(front, tmp_path / "b", **{"target.engine_url": engine, **CLASSES})
    checks = {c["id"]: c for c in verdict.data["checks"]}
    tools = checks["smoke.tools_structured"]
    assert tools["status"] == "pass", tools
    assert "by prompt-token count only" in tools["summary"]
    identity = (tmp_path / "b/requests/identity.jsonl").read_text().splitlines()
    probes = {
        r["label"]: r["http_status"] for r in map(json.loads, identity) if "gateway" in r["label"]
    }
    assert probes == {"gateway-ask": 400, "gateway-plain": 200}
    classes = (tmp_path / "b/requests/smoke-classes.jsonl").read_text().splitlines()
    assert not any("return_token_ids" in json.loads(x)["request"] for x in classes)
    assert verdict.outcome is Outcome.SECTION_PASSED, verdict.data["rules_fired"]
    assert rederive(tmp_path / "b").agrees


@pytest.mark.tampers_bundle
async def test_a_gateway_serving_the_model_under_its_own_name_is_held_to_the_engine(
    tmp_path: Path,
) -> None:
    """A gateway that serves the engine's model as `kimi` (an alias, as gateways do) is
    honest: each class's engine twin asks the engine under the engine's own name (from its
    /v1/models), so the classes are held to the engine and pass, and the engine's metrics are
    read under the name they label the series with. Before, every twin was refused (404: no
    model `kimi` at the engine) and the classes and metrics were no_data: a false hold for
    every aliasing gateway. decide agrees; a reviewer who deletes the engine's /v1/models
    answer does not get the metrics passed."""
    async with fake_vllm(FakeState()) as engine, aliasing_gateway(engine) as front:
        verdict = await _smoke(front, tmp_path / "b", **{**CLASSES, "target.engine_url": engine})
    status = _status(verdict)
    for check in ("smoke.tools_structured", "smoke.long_context", "smoke.metrics"):
        assert status[check] == "pass", verdict.data["checks"]
    assert status["target.identity"] == "pass"
    root = tmp_path / "b"
    twins = [
        json.loads(line)
        for line in (root / "requests/smoke-classes.jsonl").read_text().splitlines()
        if json.loads(line)["label"].endswith("@engine")
    ]
    assert twins
    assert {t["request"]["model"] for t in twins} == {MODEL}
    assert ALIAS not in {t["request"]["model"] for t in twins}
    assert rederive(root).agrees
    (root / "requests/engine-identity.jsonl").unlink()
    Bundle(root).seal()  # a GET is not a chat request: the ledger's count stands
    again = rederive(root)
    assert not again.agrees
    assert {c.id: c.status for c in again.checks}["smoke.metrics"] is not Status.PASS


@pytest.mark.tampers_bundle
async def test_a_gateway_bundle_without_its_engine_answers_is_not_passed(tmp_path: Path) -> None:
    """An honest gateway passes; a reviewer who then deletes the engine's own answers (and
    corrects the ledger's count) and re-seals does not get the classes passed: behind a
    gateway (target.engine_url) an answer not held to the engine's is no_data."""
    async with fake_vllm(FakeState()) as engine, relaying_gateway(engine) as front:
        verdict = await _smoke(front, tmp_path / "b", **{**CLASSES, "target.engine_url": engine})
    assert _status(verdict)["smoke.tools_structured"] == "pass", verdict.data["checks"]
    root = tmp_path / "b"
    stream = root / "requests/smoke-classes.jsonl"
    lines = stream.read_text().splitlines()
    kept = [line for line in lines if not json.loads(line)["label"].endswith("@engine")]
    stream.write_text("".join(f"{line}\n" for line in kept))
    ledger = json.loads((root / "metrics/ledger.json").read_text())
    ledger["sent"] -= len(lines) - len(kept)
    (root / "metrics/ledger.json").write_text(json.dumps(ledger))
    Bundle(root).seal()
    again = rederive(root)
    assert not again.agrees
    statuses = {c.id: c.status for c in again.checks}
    assert statuses["smoke.tools_structured"] is Status.NO_DATA
    assert statuses["smoke.long_context"] is Status.NO_DATA
