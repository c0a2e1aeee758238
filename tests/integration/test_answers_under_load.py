"""Answers under load equal answers at idle: an engine that answers a probe right alone and
wrong once batched (a fake: a correct engine cannot be made wrong on demand) is caught by
`capacity.answers_under_load`, with the probe, where, and both answers; the judgement is
re-derived from the bundle."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from golive.bundle.store import BundleReader
from golive.checks.capacity.answer_probes import CHECK, ProbeSlots, judge_answers, send_idle
from golive.checks.capacity.collect import CapacityInputs, CapacityRun
from golive.checks.capacity.load_window import load_window
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.results import CheckResult, Status
from tests.helpers.fakes import serve_app

MODEL = "fake-model"


def _app(in_flight: list[int]) -> web.Application:
    """Answers every probe right when it runs alone; with others in flight, 17 + 25 is 43."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        in_flight[0] += 1
        try:
            await asyncio.sleep(0.03)
            batched = in_flight[0] > 1
            prompt = body["messages"][-1]["content"]
            message: dict[str, Any] = {"role": "assistant", "content": "ok"}
            if "17 + 25" in prompt:
                message["content"] = "43" if batched else "42"
            elif "ZX-4471" in prompt:
                message["content"] = "ZX-4471"
            elif body.get("response_format"):
                message["content"] = '{"city": "Paris", "temp_c": 21}'
            elif body.get("tools") and "Oslo" in prompt:
                call = {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": call}],
                }
        finally:
            in_flight[0] -= 1
        answer = {"id": "x", "object": "chat.completion", "model": MODEL,
                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}  # fmt: skip
        if not body.get("stream"):
            return web.json_response(answer)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        delta = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"},
                              "finish_reason": "stop"}]}  # fmt: skip
        await response.write(f"data: {json.dumps(delta)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(_: web.Request) -> web.Response:  # what golive's preflight asks first
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", ok)
    app.router.add_get("/metrics", ok)
    return app


# a partial capacity section (the probes and one load window, no ramp): never better
@pytest.mark.synthetic_checks
@pytest.mark.parametrize(("profile", "critical"), [("generic", False), ("kimi-k3", True)])
async def test_an_answer_that_changes_under_load_fails(
    tmp_path: Path, profile: str, critical: bool
) -> None:
    """A server that answers a known-answer probe right at idle and wrong while batched fails
    capacity.answers_under_load, critical under kimi-k3."""
    async with serve_app(_app([0])) as url:
        config = load_config(None, {"target.url": url, "target.model": MODEL, "profile": profile})

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            run = CapacityRun(ctx, CapacityInputs(), MODEL, 4096)
            run.phase = "sustained"
            await send_idle(ctx, MODEL)
            probes = ProbeSlots(ctx, MODEL, "sustained-c4", 2, 2)
            await load_window(run, 4, 1.5, 400, 0, probes=probes)
            critical = ctx.profile.capacity.answers_under_load_critical
            return judge_answers(BundleReader(ctx.bundle.root), critical)

        verdict = await judge(config, tmp_path / "b", "capacity", programme, ("capacity",))
    check = next(c for c in verdict.document.results() if c.id == CHECK)
    assert check.status is Status.FAIL
    assert check.critical is critical
    assert "'arithmetic' answered '42' at idle (correct) and '43' under load (sustained-c4)" in (
        check.summary
    )
    assert check.measurements["correct_at_idle"] == 4
    assert check.measurements["wrong_under_load"] == 2
    saved = (tmp_path / "b/requests/answer-probes.jsonl").read_text().splitlines()
    labels = [json.loads(x)["label"] for x in saved]
    assert labels[:4] == [
        f"probe-{p}-idle" for p in ("arithmetic", "extraction", "schema", "tool_call")
    ]
    assert len(labels) == 12  # four at idle, each twice under load
