"""A gateway in front of vLLM serving its model under another name (as LiteLLM, an API
gateway or a router does): lists it as ALIAS, maps ALIAS to the engine's name on the way in
and back in every answer; everything else is passed on as it is. No /metrics of its own."""

import json
import sys

import aiohttp
from aiohttp import web

ENGINE, PORT, ALIAS = sys.argv[1], int(sys.argv[2]), sys.argv[3]


async def handle(request: web.Request) -> web.StreamResponse:
    session: aiohttp.ClientSession = request.app["session"]
    if request.path == "/metrics":
        return web.Response(status=404, text="no metrics here")
    async with session.get(f"{ENGINE}/v1/models") as listed:
        name = (await listed.json())["data"][0]["id"]
    body = await request.read()
    if request.path == "/v1/models":
        async with session.get(f"{ENGINE}/v1/models") as upstream:
            data = await upstream.json()
        for entry in data["data"]:
            entry["id"] = ALIAS
        return web.json_response(data)
    if request.path == "/v1/chat/completions" and body:
        sent = json.loads(body)
        if sent.get("model") == ALIAS:
            sent["model"] = name
        body = json.dumps(sent).encode()
    own, theirs = json.dumps(name).encode(), json.dumps(ALIAS).encode()
    async with session.request(
        request.method,
        f"{ENGINE}{request.path_qs}",
        data=body or None,
        headers={"Content-Type": "application/json"},
    ) as upstream:
        response = web.StreamResponse(status=upstream.status)
        response.content_type = upstream.content_type
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk.replace(own, theirs))
        await response.write_eof()
        return response


async def app() -> web.Application:
    application = web.Application()
    application["session"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
    application.router.add_route("*", "/{tail:.*}", handle)
    return application


web.run_app(app(), host="127.0.0.1", port=PORT, print=None)
