"""A fake vLLM for fault injection only: behaviours the real engine will not show on demand.

It speaks just enough of vLLM's surface (health, version, models, metrics, chat with SSE)
for golive's smoke checks, and each `fault` breaks one thing the way real deployments do.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.helpers.fakes import serve_app

MODEL = "fake-model"


@dataclass
class FakeState:
    fault: str | None = None
    successes: int = 0
    prompt_tokens: int = 0
    seen_auth: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    chats: int = 0  # chat requests received
    hanging: int = 0  # chat requests held open right now (their clients still connected)
    peak_hanging: int = 0
    models_asked: int = 0  # GET /v1/models received
    models_down_at: int = 1  # fault "models_down_once": which ask of /v1/models gets a 503
    running: int = 0  # fault "knee": requests being served right now
    knee_at: int = 2  # fault "knee": past this many in flight, each request takes longer
    die_above: int = 2  # fault "dies_above": more in flight than this kills the engine once
    down_s: float = 1.0  # ... which serves again this long after (its platform restarts it)
    die_again_above: int | None = None  # ... and once restarted, more than this kills it again
    broken_after_restart: bool = False  # ... or, restarted, it answers HTTP 500 to every chat
    version_after_restart: str | None = None  # ... or it comes back as another vLLM version
    down_until: float = 0.0
    deaths: int = 0
    root: str | None = None  # /v1/models `root`: the model path behind the served name
    model: str = MODEL  # the served name (a watch test serves the accepted bundle's)
    started: float = field(default_factory=time.time)  # process_start_time_seconds
    http_status: dict[str, int] = field(default_factory=dict)  # answers by status class
    seen: set[str] = field(default_factory=set)  # fault "overloaded": bodies served before
    tokenize: bool = False  # serve vLLM's /tokenize (chat form: the stand-in's prompt ids)
    tokenized: list[dict[str, Any]] = field(default_factory=list)  # the /tokenize bodies asked
    cache_config: dict[str, str] = field(default_factory=dict)  # vllm:cache_config_info labels
    prefix_queries: int = 0  # vllm:prefix_cache_queries: every prompt token asked
    prefix_hits: int = 0  # vllm:prefix_cache_hits: none (a cache that evicted everything)
    kv_usage: float | None = None  # vllm:kv_cache_usage_perc, where the stand-in states it


_ENGINE_DIED = {"error": {"message": "EngineCore died", "type": "InternalServerError", "code": 500}}


def _down(state: FakeState) -> bool:
    """Fault "dies_above": the engine is dead until its restart."""
    return state.fault == "dies_above" and time.monotonic() < state.down_until


async def _dies_above(state: FakeState) -> bool:
    """Fault "dies_above": each request takes 50 ms; the first time more than `die_above`
    are in flight the engine dies (False: this request is answered HTTP 500 with the rest);
    restarted, more than `die_again_above` (when set) kills it once more."""
    state.running += 1
    try:
        limit = state.die_above if not state.deaths else state.die_again_above
        if limit is not None and state.running > limit and not _down(state) and state.deaths < 2:
            state.deaths += 1
            state.down_until = time.monotonic() + state.down_s
        await asyncio.sleep(0.05)
        return not _down(state) and not (state.deaths and state.broken_after_restart)
    finally:
        state.running -= 1


async def _overloaded(state: FakeState, body: dict[str, object]) -> bool:
    """A front end shedding load: past `knee_at` in flight it answers 503 to a request it has
    not seen before (the same body sent again, a client's retry, is served)."""
    state.running += 1
    try:
        key = json.dumps(body, sort_keys=True)
        shed = state.running > state.knee_at and key not in state.seen
        state.seen.add(key)
        await asyncio.sleep(0.05)
        return not shed
    finally:
        state.running -= 1


async def _knee(state: FakeState) -> None:
    """A batch past its knee: every request takes 20 ms up to `knee_at` in flight, and with
    the square of the excess past it (x4 at twice the knee), so throughput halves while
    latency grows (the engine's waiting queue stays empty, as on the H200)."""
    state.running += 1
    try:
        await asyncio.sleep(0.02 * max(1.0, state.running / state.knee_at) ** 2)
    finally:
        state.running -= 1


async def _hold(state: FakeState) -> None:
    """Hold a request open until released or until its client goes away."""
    state.hanging += 1
    state.peak_hanging = max(state.peak_hanging, state.hanging)
    try:
        await state.release.wait()
    finally:
        state.hanging -= 1


def restart(state: FakeState, down_s: float) -> None:
    """The engine process dies now and a new one serves `down_s` later (its platform
    restarting it): /health fails meanwhile, and the new process has its own start time and
    counters from zero."""
    state.fault = "dies_above"
    state.die_above = 1 << 30  # no further deaths from load
    state.deaths += 1
    state.down_until = time.monotonic() + down_s
    state.started = time.time() + down_s
    state.successes = state.prompt_tokens = 0
    state.http_status = {}


def _metrics(state: FakeState) -> str:
    model = state.model
    http = "".join(
        f'http_requests_total{{handler="/v1/chat/completions",method="POST",status="{c}"}} {n}\n'
        for c, n in sorted(state.http_status.items())
    )
    return (
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{model}"}} '
        f"{state.successes}\n"
        "# TYPE vllm:prompt_tokens_total counter\n"
        f'vllm:prompt_tokens_total{{engine="0",model_name="{model}"}} {state.prompt_tokens}\n'
        "# TYPE vllm:num_preemptions_total counter\n"
        f'vllm:num_preemptions_total{{engine="0",model_name="{model}"}} 0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="{model}"}} {state.running}\n'
        "# TYPE process_start_time_seconds gauge\n"
        f"process_start_time_seconds {state.started}\n"
        + ("# TYPE http_requests_total counter\n" + http if http else "")
        + _cache_config(state.cache_config)
        + _prefix_counters(state)
        + (
            ""
            if state.kv_usage is None
            else "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="{model}"}} {state.kv_usage}\n'
        )
    )


def _prefix_counters(state: FakeState) -> str:
    """The prefix-cache counters, where the stand-in states its cache settings."""
    if not state.cache_config:
        return ""
    labels = f'engine="0",model_name="{state.model}"'
    return (
        "# TYPE vllm:prefix_cache_queries counter\n"
        f"vllm:prefix_cache_queries_total{{{labels}}} {state.prefix_queries}\n"
        "# TYPE vllm:prefix_cache_hits counter\n"
        f"vllm:prefix_cache_hits_total{{{labels}}} {state.prefix_hits}\n"
    )


def _cache_config(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    said = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{said}}} 1.0\n"


def _prompt_tokens(body: dict[str, Any]) -> int:
    """A stand-in for the engine's count: 7 for the template, a token a word of each message
    (so a gateway that adds or drops text changes it, as it would on a real engine)."""
    words = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            words += len(content.split())
    return 7 + words


def _prompt_ids(body: dict[str, Any]) -> list[int]:
    """The prompt as this stand-in tokenizes it (`_prompt_tokens` ids): what vLLM returns
    as `prompt_token_ids` when the request asks (`return_token_ids`)."""
    ids = list(range(1, 8))
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            ids += [zlib.crc32(word.encode()) % 100_000 for word in content.split()]
    return ids


def _chunk(delta: dict[str, object], finish: str | None = None, model: str = MODEL) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def build_app(state: FakeState) -> web.Application:
    async def health(_: web.Request) -> web.Response:
        return web.Response(status=503 if _down(state) else 200)

    async def version(_: web.Request) -> web.Response:
        if state.fault == "not_vllm":
            return web.Response(status=404, text="<html>Not Found</html>", content_type="text/html")
        if state.fault == "odd_version":  # a proxy that answers /version with its own word
            return web.json_response({"version": "ok"})
        if state.deaths and state.version_after_restart:
            return web.json_response({"version": state.version_after_restart})
        return web.json_response({"version": "0.32.0"})

    async def models(_: web.Request) -> web.Response:
        state.models_asked += 1
        if state.fault == "models_down_once" and state.models_asked == state.models_down_at:
            return web.json_response({"error": "starting"}, status=503)
        entry: dict[str, object] = {"id": state.model, "object": "model", "max_model_len": 4096}
        if state.root is not None:
            entry["root"] = state.root
        return web.json_response({"object": "list", "data": [entry]})

    async def metrics(_: web.Request) -> web.Response:
        if state.fault == "metrics_500":
            return web.Response(status=500, text="Internal Server Error")
        if state.fault == "metrics_hang":
            await state.release.wait()
        if state.fault == "metrics_garbage":
            return web.Response(text="vllm:num_requests_running{engine=0 1\n\x00garbage {{{\n")
        if state.fault in ("not_vllm", "bad_metrics"):
            return web.Response(
                text="<html><body>metrics here</body></html>", content_type="text/html"
            )
        if state.fault == "stale_metrics":
            return web.Response(text=_metrics(FakeState(model=state.model, started=state.started)))
        if state.fault == "other_engine_metrics":  # the metrics URL of another deployment
            return web.Response(text=_metrics(state).replace(state.model, "other-model"))
        return web.Response(text=_metrics(state))

    async def chat(request: web.Request) -> web.StreamResponse:
        state.chats += 1
        state.seen_auth.append(request.headers.get("Authorization", ""))
        body = await request.json()
        if body.get("model") != state.model:
            return web.json_response(
                {
                    "error": {
                        "message": f"The model `{body.get('model')}` does not exist.",
                        "type": "NotFoundError",
                        "param": "model",
                        "code": 404,
                    }
                },
                status=404,
            )
        if state.fault == "http_500" or _down(state):
            return web.json_response(_ENGINE_DIED, status=500)
        if state.fault == "dies_above" and not await _dies_above(state):
            return web.json_response(_ENGINE_DIED, status=500)
        if state.fault == "flaky_500":  # an engine defect each request meets once
            key = json.dumps(body, sort_keys=True)
            if key not in state.seen:
                state.seen.add(key)
                return web.json_response(_ENGINE_DIED, status=500)
        if state.fault == "overloaded" and not await _overloaded(state, body):
            return web.json_response(
                {"error": {"message": "server overloaded", "type": "ServiceUnavailable"}},
                status=503,
            )
        messages = body.get("messages") or []
        if state.fault == "tool_result_500" and any(m.get("role") == "tool" for m in messages):
            return web.json_response(  # a chat template that breaks on tool results
                {
                    "error": {
                        "message": "KeyError: 'tool_call_id' rendering the chat template",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                },
                status=500,
            )
        if state.fault == "no_structured" and body.get("response_format"):
            return web.json_response(  # a server launched without structured outputs
                {
                    "error": {
                        "message": "response_format json_schema is not supported by this server",
                        "type": "BadRequestError",
                        "param": "response_format",
                        "code": 400,
                    }
                },
                status=400,
            )
        if state.fault == "hang" or (state.fault == "hang_tools" and body.get("tools")):
            await _hold(state)
        if state.fault == "knee":
            await _knee(state)
        prompt = _prompt_tokens(body)
        state.prompt_tokens += prompt
        state.prefix_queries += prompt
        # a shared endpoint or a gateway routing elsewhere: another model answers every request
        answered = "other-model" if state.fault == "other_model" else state.model
        if not body.get("stream"):
            state.successes += 1
            message: dict[str, object] = {"role": "assistant", "content": "All good."}
            finish = "stop"
            if body.get("tools") and body.get("tool_choice") not in (None, "none"):
                name = body["tools"][0]["function"]["name"]
                call = {"name": name, "arguments": '{"field_0": "item-7"}'}
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "call_fake_1", "type": "function", "function": call}],
                }
                finish = "tool_calls"
            elif body.get("response_format"):
                message = {"role": "assistant", "content": '{"decision": "reject", "reason": "no"}'}
            answer: dict[str, object] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": answered,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": 3,
                    "total_tokens": prompt + 3,
                },
            }
            if body.get("return_token_ids"):
                answer["prompt_token_ids"] = _prompt_ids(body)
            return web.json_response(answer)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        first = _chunk({"role": "assistant", "content": ""}, model=answered)
        if body.get("return_token_ids"):  # vLLM sends the prompt on the first chunk only
            payload = json.loads(first.removeprefix(b"data: "))
            first = (
                b"data: "
                + json.dumps({**payload, "prompt_token_ids": _prompt_ids(body)}).encode()
                + b"\n\n"
            )
        await response.write(first)
        await response.write(_chunk({"content": "All "}, model=answered))
        if state.fault == "reset_stream":
            assert request.transport is not None
            request.transport.abort()
            return response
        if state.fault == "malformed_stream":
            await response.write(b"data: {this is not json\n\n")
        if state.fault == "odd_types":  # valid JSON, with types no server should send
            await response.write(
                b'data: {"choices":[{"index":0,"finish_reason":1,"delta":{"tool_calls":'
                b'[{"index":true,"id":7,"type":{"a":1},"function":{"name":"f","arguments":"{}"}}'
                b"]}}]}\n\n"
            )
        if state.fault == "error_event":
            await response.write(
                b'data: {"error":{"message":"EngineCore encountered an issue","code":500}}\n\n'
            )
        if state.fault == "drip":  # one byte at a time, never finishing
            while True:
                await response.write(b" ")
                await asyncio.sleep(0.05)
        if state.fault == "unbounded":  # a stream that never ends, at full speed
            piece = _chunk({"content": "x" * 4000}) * 16
            while True:
                await response.write(piece)
        await response.write(_chunk({"content": "good."}, "stop", answered))
        if state.fault != "truncated_stream":
            usage = {"prompt_tokens": prompt, "completion_tokens": 2}
            await response.write(
                b"data: "
                + json.dumps({"id": "chatcmpl-fake", "choices": [], "usage": usage}).encode()
                + b"\n\ndata: [DONE]\n\n"
            )
        state.successes += 1
        await response.write_eof()
        return response

    @web.middleware
    async def count_status(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await handler(request)
        if request.path == "/v1/chat/completions":
            status = f"{response.status // 100}xx"
            state.http_status[status] = state.http_status.get(status, 0) + 1
        return response

    app = web.Application(middlewares=[count_status])
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat)

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("model") != state.model:  # as vLLM: only the model it serves
            error = {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}
            return web.json_response({"error": error}, status=404)
        state.tokenized.append(body)
        ids = _prompt_ids(body) + [9] * len(body.get("tools") or ())  # a tool adds its schema
        return web.json_response({"count": len(ids), "max_model_len": 4096, "tokens": ids})

    if state.tokenize:
        app.router.add_post("/tokenize", tokenize)
    return app


@asynccontextmanager
async def fake_vllm(state: FakeState) -> AsyncIterator[str]:
    """Serve the fake on 127.0.0.1 with an ephemeral port; yield its base URL."""
    async with serve_app(build_app(state)) as url:
        try:
            yield url
        finally:
            state.release.set()  # before cleanup, which waits for handlers to finish
