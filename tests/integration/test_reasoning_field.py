"""Contract drift a client would miss: the reasoning field. vLLM has written reasoning as
`reasoning_content` and, later, as `reasoning`; a client that reads the field the server no
longer writes gets None silently. `agent.client_reasoning_field` names the client's field and
`agent.client_reasoning_field` (the check) compares it with what every answer carried. The
servers here are fakes (the bundled CPU model is no reasoning model): one per spelling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.rules import classify_reasoning_field
from golive.checks.agent.select import cases_for
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.profiles import load_profile
from golive.results import CheckResult, Status
from golive.traffic.sse import decode_events, reassemble
from tests.helpers.fakes import serve_app

MODEL = "fake-model"


def _app(field: str) -> web.Application:
    """A server that thinks aloud in `field`, streamed and not."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            message = {"role": "assistant", "content": "Hello, on-call team.", field: "Greet."}
            return web.json_response(
                {"id": "x", "object": "chat.completion", "model": MODEL,
                 "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            )  # fmt: skip
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta, finish in (({field: "Greet."}, None), ({"content": "Hello."}, "stop")):
            chunk = {"id": "x", "model": MODEL,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


@pytest.mark.parametrize(
    ("server", "client", "status"),
    [
        ("reasoning", "reasoning_content", Status.FAIL),
        ("reasoning_content", "reasoning", Status.FAIL),
        ("reasoning", "reasoning", Status.PASS),
        ("reasoning_content", "reasoning_content", Status.PASS),
    ],
)
async def test_the_client_reads_the_field_the_server_writes(
    tmp_path: Path, server: str, client: str, status: Status
) -> None:
    """agent.client_reasoning_field passes when the client's field is the one the server writes and
    fails naming both when not."""
    async with serve_app(_app(server)) as url:
        config = load_config(
            None,
            {
                "target.url": url,
                "agent.cases": ["no_call"],
                "agent.repeat": 1,
                "agent.client_reasoning_field": client,
            },
        )
        settings = AgentSettings.from_config(
            config, cases_for(config.agent, load_profile(config.profile))
        )

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_agent(ctx, settings)

        verdict = await judge(config, tmp_path / "b", "agent", programme, ("agent",))
    checks = {c.id: c for c in verdict.document.results()}
    check = checks["agent.client_reasoning_field"]
    assert check.status is status, check.summary
    assert check.measurements[f"answers_with_{server}"] == 2  # streamed and plain
    if status is Status.FAIL:
        assert f"the server writes reasoning in {server!r} in 2 answer(s), never in {client!r}" in (
            check.summary
        )


def test_no_reasoning_at_all_cannot_confirm_the_field() -> None:
    """With no reasoning in any answer the field cannot be confirmed: no_data, pointing at
    --reasoning-parser."""
    status, summary = classify_reasoning_field({"reasoning": 0}, "reasoning")
    assert status == "no_data"
    assert "--reasoning-parser" in summary


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_stream_keeps_the_field_its_deltas_used(field: str) -> None:
    """A reassembled stream keeps reasoning under the key its deltas used, and not under the other
    spelling."""
    raw = (
        f'data: {{"choices":[{{"index":0,"delta":{{"{field}":"think"}}}}]}}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    events, _ = decode_events([raw.encode()])
    message: dict[str, Any] = reassemble(events).as_completion()["choices"][0]["message"]
    assert message[field] == "think"
    other = ({"reasoning", "reasoning_content"} - {field}).pop()
    assert other not in message
