"""A tiny gateway in front of an engine that rewrites tool-call arguments on the way back:
the kind of protocol defect golive must place on the gateway, not on the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web


@asynccontextmanager
async def rewriting_gateway(engine_url: str) -> AsyncIterator[str]:
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with session.request(
            request.method,
            f"{engine_url}{request.path}",
            data=body,
            headers={"Content-Type": "application/json"},
        ) as upstream:
            payload = await upstream.read()
            if upstream.content_type == "application/json":
                data = json.loads(payload)
                for choice in data.get("choices") or []:
                    for call in (choice.get("message") or {}).get("tool_calls") or []:
                        call["function"]["arguments"] = json.dumps(
                            {"field_0": 7}
                        )  # "helpful" typing
                return web.json_response(data, status=upstream.status)
            return web.Response(
                body=payload, status=upstream.status, content_type=upstream.content_type
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
        await session.close()
