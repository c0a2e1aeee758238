"""A small OpenAI-compatible streaming server that records when it did everything.

For each request it records the arrival (the socket read that completed the request) and
the moment it wrote each token event, on the machine's monotonic clock
(`time.perf_counter_ns` = CLOCK_MONOTONIC, the clock every process on this host shares).
Clients are judged against these stamps: scheduling lag = arrival - intended send time;
timing error = client stamp - server stamp.

    python timing_server.py PORT LOG --ttft-ms 20 --itl-ms 5

Answers stream `max_tokens` tokens (default 16): the first after `--ttft-ms`, then one per
`--itl-ms`, each its own write with TCP_NODELAY (the role chunk rides with the first token,
as in vLLM). With `--step-ms`, an answer starts at the close of the step it arrived in, as
an engine's batch does: every request that arrived in one step is answered together.
`/health` and `/v1/models` answer at once.
On SIGTERM it writes one JSON line per request to LOG and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import socket
import time
from typing import Any

import httptools

from sse import head_event, tail_events, token_event

MODELS = b'{"object":"list","data":[{"id":"bench-model","object":"model","owned_by":"bench"}]}'


class _Handler(asyncio.Protocol):
    def __init__(self, server: TimingServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.now = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter_ns()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        url, headers, body = self.url, self.headers, b"".join(self.body)
        self.url, self.headers, self.body = b"", {}, []
        assert self.transport is not None
        if url.endswith(b"/health"):
            self._plain(b"", b"text/plain")
        elif url.endswith(b"/v1/models"):
            self._plain(MODELS, b"application/json")
        else:
            asyncio.get_running_loop().create_task(
                self.server.stream(self.transport, self.now, headers, body)
            )

    def _plain(self, body: bytes, kind: bytes) -> None:
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: "
            + kind
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class TimingServer:
    def __init__(
        self, ttft_ms: float, itl_ms: float, default_tokens: int, step_ms: float = 0.0
    ) -> None:
        self.ttft_s = ttft_ms / 1000
        self.itl_s = itl_ms / 1000
        self.step_s = step_ms / 1000
        self.default_tokens = default_tokens
        self.log: list[dict[str, Any]] = []

    async def stream(
        self,
        transport: asyncio.Transport,
        arrival_ns: int,
        headers: dict[bytes, bytes],
        body: bytes,
    ) -> None:
        tokens = self.default_tokens
        try:
            request = json.loads(body) if body else {}
            tokens = int(
                request.get("max_tokens") or request.get("max_completion_tokens") or tokens
            )
        except (ValueError, TypeError):
            pass
        sent: list[int] = []
        entry = {
            "id": headers.get(b"x-request-id", b"").decode(),
            "arrival_ns": arrival_ns,
            "body_bytes": len(body),
            "token_ns": sent,
        }
        self.log.append(entry)
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        if self.step_s:  # an engine's step: every answer due in a step ends at its close
            await asyncio.sleep(self.step_s - time.monotonic() % self.step_s)
        if self.ttft_s == 0 and self.itl_s == 0:  # no pacing asked: the whole answer at once
            events = [head_event()] + [token_event(i) for i in range(tokens)]
            body = b"".join(events) + tail_events(16, tokens)
            sent.extend([time.perf_counter_ns()] * tokens)
            transport.write(head + _chunk(body) + b"0\r\n\r\n")
            return
        transport.write(head)
        start = time.perf_counter()
        for i in range(tokens):
            due = start + self.ttft_s + i * self.itl_s
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if transport.is_closing():
                return
            sent.append(time.perf_counter_ns())
            # the role chunk goes out with the first token, as vLLM sends it
            event = head_event() + token_event(i) if i == 0 else token_event(i)
            transport.write(_chunk(event))
        transport.write(_chunk(tail_events(16, tokens)) + b"0\r\n\r\n")


async def main() -> None:
    gc.disable()  # a short-lived process: no collector pauses inside the measured stamps
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("log")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--step-ms", type=float, default=0.0)  # answers end in steps, together
    args = parser.parse_args()
    server = TimingServer(args.ttft_ms, args.itl_ms, args.tokens, args.step_ms)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: _Handler(server), "127.0.0.1", args.port, backlog=16384
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    listener.close()
    with open(args.log, "w") as out:
        for entry in server.log:
            out.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
