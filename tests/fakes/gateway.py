"""A tiny gateway in front of an engine that rewrites tool-call arguments on the way back:
the kind of protocol defect golive must place on the gateway, not on the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from tests.fakes import serve_app


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
    try:
        async with serve_app(app) as url:
            yield url
    finally:
        await session.close()
