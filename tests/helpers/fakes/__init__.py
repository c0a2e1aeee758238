"""Fakes for fault injection only (behaviour the real engine will not show on demand)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    """Serve an aiohttp app on 127.0.0.1 with an ephemeral port; yield its base URL.

    A handler is cancelled when its client goes away, so a fake can count what is open."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
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
