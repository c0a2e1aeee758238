"""Tiny gateways in front of a real engine, each with one defect golive must place on the
right layer: `rewriting_gateway` "helpfully" retypes tool arguments in non-streamed answers
(a gateway defect); `hedging_gateway` sends every chat request to the engine twice and
answers with whichever finishes first (hidden retries: an idempotency defect);
`injecting_gateway` adds a 600-word system prompt and `trimming_gateway` drops every turn but
the last, and `swapping_gateway` replaces a word keeping the length (request rewrites, held
to the engine by the prompt it received); `aliasing_gateway`
serves the engine's model under its own name (`kimi`), as gateways do (an honest gateway);
`strict_gateway` refuses request fields outside the OpenAI chat schema (HTTP 400), as
schema-validating proxies do (honest, but vLLM's own fields do not pass); `stalling_gateway`
answers the first `/v1/models` (golive's preflight) and then holds every later one without a
byte, as a gateway whose upstream call hangs on a loaded engine does."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from tests.helpers.fakes import serve_app

ALIAS = "kimi"  # the aliasing gateway's own name for the engine's model
STALL_S = 60.0  # how long the stalling gateway holds a /v1/models ask (past any test's timeout)
# the OpenAI chat request's fields the strict gateway knows (a part of the schema is enough)
OPENAI_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
        "stream", "stream_options", "tools", "tool_choice", "response_format", "seed", "n",
        "stop", "user", "parallel_tool_calls", "logprobs", "top_logprobs",
    }
)  # fmt: skip


async def _relay(
    session: aiohttp.ClientSession, engine_url: str, request: web.Request, body: bytes
) -> web.StreamResponse:
    """Forward one request; stream the answer through chunk by chunk."""
    async with session.request(
        request.method,
        f"{engine_url}{request.path}",
        data=body or None,
        headers={"Content-Type": "application/json"},
    ) as upstream:
        if upstream.content_type == "text/event-stream":
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
        payload = await upstream.read()
        return web.Response(
            body=payload, status=upstream.status, content_type=upstream.content_type
        )


@asynccontextmanager
async def _gateway(engine_url: str, handler_for: str) -> AsyncIterator[str]:
    session = aiohttp.ClientSession()

    async def rewrite(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path != "/v1/chat/completions" or json.loads(body).get("stream"):
            return await _relay(session, engine_url, request, body)
        async with session.post(
            f"{engine_url}{request.path}", data=body, headers={"Content-Type": "application/json"}
        ) as upstream:
            data = await upstream.json()
            for choice in data.get("choices") or []:
                for call in (choice.get("message") or {}).get("tool_calls") or []:
                    call["function"]["arguments"] = json.dumps({"field_0": 7})  # "helpful"
            return web.json_response(data, status=upstream.status)

    async def hedge(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path != "/v1/chat/completions":
            return await _relay(session, engine_url, request, body)

        async def attempt() -> tuple[int, bytes, str]:
            async with session.post(
                f"{engine_url}{request.path}",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as upstream:
                return upstream.status, await upstream.read(), upstream.content_type

        first = asyncio.ensure_future(attempt())
        await asyncio.sleep(0.2)
        second = asyncio.ensure_future(attempt())  # the hedge: same request, again
        done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
        status, payload, content_type = done.pop().result()
        return web.Response(body=payload, status=status, content_type=content_type)

    async def inject(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == "/v1/chat/completions":
            sent = json.loads(body)
            house = {"role": "system", "content": " ".join(["Be brief and polite."] * 150)}
            sent["messages"] = [house, *sent.get("messages", [])]  # 600 words nobody asked for
            body = json.dumps(sent).encode()
        return await _relay(session, engine_url, request, body)

    async def trim(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == "/v1/chat/completions":
            sent = json.loads(body)
            messages = sent.get("messages", [])
            # "context management": only the system prompt and the last turn reach the engine
            sent["messages"] = [m for m in messages[:-1] if m.get("role") == "system"] + [
                messages[-1]
            ]
            body = json.dumps(sent).encode()
        return await _relay(session, engine_url, request, body)

    async def swap(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == "/v1/chat/completions":
            sent = json.loads(body)
            for message in sent.get("messages", []):
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    # "policy": one word for another, the length kept
                    message["content"] = " ".join(["Politely", *message["content"].split()[1:]])
            body = json.dumps(sent).encode()
        return await _relay(session, engine_url, request, body)

    async def relay(request: web.Request) -> web.StreamResponse:
        return await _relay(session, engine_url, request, await request.read())

    models_asked = 0

    async def stall(request: web.Request) -> web.StreamResponse:
        nonlocal models_asked
        if request.path == "/v1/models":
            models_asked += 1
            if models_asked > 1:  # the preflight's answered; every later ask hangs
                await asyncio.sleep(STALL_S)
        return await _relay(session, engine_url, request, await request.read())

    async def strict(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == "/v1/chat/completions":
            extra = sorted(set(json.loads(body)) - OPENAI_FIELDS)
            if extra:
                error = {
                    "message": f"Extra inputs are not permitted: {', '.join(extra)}",
                    "type": "invalid_request_error",
                    "param": extra[0],
                    "code": 400,
                }
                return web.json_response({"error": error}, status=400)
        return await _relay(session, engine_url, request, body)

    async def alias(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with session.get(f"{engine_url}/v1/models") as listed:
            engine_name = (await listed.json())["data"][0]["id"]
        if request.path == "/v1/models":
            async with session.get(f"{engine_url}/v1/models") as upstream:
                data = await upstream.json()
            for entry in data["data"]:
                entry["id"] = ALIAS
            return web.json_response(data)
        if request.path == "/v1/chat/completions":
            sent = json.loads(body)
            if sent.get("model") == ALIAS:
                sent["model"] = engine_name
            body = json.dumps(sent).encode()
        own, theirs = json.dumps(engine_name).encode(), json.dumps(ALIAS).encode()
        async with session.request(
            request.method,
            f"{engine_url}{request.path}",
            data=body or None,
            headers={"Content-Type": "application/json"},
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk.replace(own, theirs))  # answers name the alias
            await response.write_eof()
            return response

    handlers = {
        "rewrite": rewrite,
        "hedge": hedge,
        "inject": inject,
        "trim": trim,
        "relay": relay,
        "alias": alias,
        "swap": swap,
        "strict": strict,
        "stall": stall,
    }
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handlers[handler_for])
    try:
        async with serve_app(app) as url:
            yield url
    finally:
        await session.close()


def rewriting_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    return _gateway(engine_url, "rewrite")


def hedging_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    return _gateway(engine_url, "hedge")


def injecting_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Adds a 600-word system prompt to every chat request."""
    return _gateway(engine_url, "inject")


def trimming_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Passes on only the system prompt and the last message: earlier turns and tool results
    are dropped."""
    return _gateway(engine_url, "trim")


def swapping_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Replaces the first word of every user message with "Politely": the request is
    rewritten, its length kept (the engine's prompt-token count cannot show it)."""
    return _gateway(engine_url, "swap")


def relaying_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Passes every request and answer on unchanged: an honest gateway."""
    return _gateway(engine_url, "relay")


def aliasing_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Serves the engine's model as `kimi`: lists it so, maps it to the engine's name on the
    way in and back in every answer."""
    return _gateway(engine_url, "alias")


def strict_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Refuses a chat request with a field outside the OpenAI schema (400); passes the rest
    on unchanged."""
    return _gateway(engine_url, "strict")


def stalling_gateway(engine_url: str) -> contextlib.AbstractAsyncContextManager[str]:
    """Answers the first `/v1/models` ask, then holds every later one for `STALL_S` without a
    byte; every other request passes on unchanged."""
    return _gateway(engine_url, "stall")
