"""The traffic engine's HTTP/1.1 transport against scripted servers: how answers are framed,
when connections are reused, and what a broken answer leaves on the record."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.records import FailureKind, RequestRecord, parse
from golive.traffic.schedule import Schedule, arrival_offsets_ns

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SSE = (
    b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
)


class Scripted:
    """A TCP server that answers each request with `script`; counts connections."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.open_now = 0
        self.peak_open = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.peak_open = max(self.peak_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                await self.script(reader, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.open_now -= 1
            writer.close()


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[tuple[str, Scripted]]:
    server = Scripted(script)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        listener.close()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def json_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = b'{"ok": true}'
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()


async def paced_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
    writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
    for event in SSE:
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(_chunk(event))
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _chat(url: str, read_timeout_s: float = 10.0) -> RequestRecord:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with TargetClient(ClientSettings(url, read_timeout_s=read_timeout_s)) as client:
        return await client.chat(body, "t")


async def test_keep_alive_reuses_one_connection() -> None:
    """Five requests go over one kept-alive connection, each with golive's request id."""
    async with scripted(json_answer) as (url, server), TargetClient(ClientSettings(url)) as client:
        records = [await client.get("/health", "h") for _ in range(5)]
    assert [r.status for r in records] == [200] * 5
    assert all(r.raw_text == '{"ok": true}' for r in records)
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("GET /health HTTP/1.1\r\n")
    assert "X-Request-Id: golive-" in first


async def test_each_socket_read_is_one_stamped_chunk() -> None:
    """Events 20 ms apart arrive as separate chunks with rising stamps; the stream parses."""
    async with scripted(paced_stream) as (url, _):
        record = await _chat(url)
    assert record.ok
    assert len(record.chunks) >= 3
    stamps = record.timings.chunk_ns
    assert list(stamps) == sorted(stamps)
    assert (stamps[-1] - stamps[0]) / 1e6 >= 30
    parsed = parse(record)
    assert parsed.stream is not None
    assert parsed.stream.content == "ab"
    assert parsed.stream.done
    assert parsed.ttft_ms is not None
    assert parsed.ttft_ms >= 15


async def test_answer_delimited_by_close_is_complete_and_not_reused() -> None:
    """An answer ended by closing the connection is complete, and that connection is not reused."""

    async def close_delimited(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello ")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(b"world")
        await writer.drain()
        writer.close()

    async with (
        scripted(close_delimited) as (url, server),
        TargetClient(ClientSettings(url)) as client,
    ):
        first = await client.get("/x", "x")
        second = await client.get("/x", "x")
    assert first.ok
    assert first.raw_text == "hello world"
    assert second.ok
    assert server.connections == 2


async def test_a_kept_alive_connection_closed_as_it_is_reused_is_sent_again() -> None:
    """uvicorn closes a connection when the app raises after it answered (vLLM 0.24 on the
    H200 did, after a 400 for a malformed tool-call history): the next request golive wrote on
    it was reset before any answer, and a structured-output case failed for its neighbour's
    fault. Clients send such a request again on a fresh connection; so does golive, and the
    record says so."""
    served = [0]

    async def drop_the_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served[0] += 1
        if served[0] == 2:
            writer.close()  # read the request, then closed without a byte of answer
            return
        await json_answer(reader, writer)

    async with (
        scripted(drop_the_second) as (url, server),
        TargetClient(ClientSettings(url)) as client,
    ):
        records = [await client.get("/x", "x") for _ in range(3)]
    assert [r.ok for r in records] == [True, True, True]
    assert [r.resent for r in records] == [False, True, False]
    assert server.connections == 2
    assert len(server.requests) == 4
    assert parse(records[1]).saved_line().resent is True


async def test_a_fresh_connection_closed_before_answering_is_not_sent_again() -> None:
    """A fresh connection closed before any answer is a disconnect failure, not sent a second time."""

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with scripted(drop) as (url, server), TargetClient(ClientSettings(url)) as client:
        record = await client.get("/x", "x")
    assert record.failure is not None
    assert record.failure.kind is FailureKind.DISCONNECTED
    assert "before answering" in record.failure.message
    assert not record.resent
    assert len(server.requests) == 1


async def test_server_closing_mid_stream_keeps_what_arrived() -> None:
    """A server closing mid-stream leaves a disconnect failure that keeps the bytes that arrived."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(SSE[0]))
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.close()

    async with scripted(reset) as (url, _):
        record = await _chat(url)
    assert record.failure is not None
    assert record.failure.kind is FailureKind.DISCONNECTED
    assert "mid-answer" in record.failure.message
    assert record.status == 200
    assert b"".join(record.chunks) == SSE[0]


async def test_silent_server_is_a_read_timeout() -> None:
    """A server that goes silent is cut at the read timeout, saying how long it was silent."""

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async with scripted(stall) as (url, _):
        started = time.monotonic()
        record = await _chat(url, read_timeout_s=0.3)
    assert record.failure is not None
    assert record.failure.kind is FailureKind.TIMEOUT
    assert "no data for 0.3 s" in record.failure.message
    assert 0.25 < time.monotonic() - started < 2


async def test_a_server_that_never_begins_answering_is_cut_at_the_first_byte_limit() -> None:
    """A server that takes a streamed request (or a GET) and sends nothing is given up after
    client.first_byte_timeout_s, not after the 10 s read timeout; a plain chat completion,
    whose first byte is its whole answer, waits for the read timeout instead."""

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        await asyncio.sleep(5)

    settings = ClientSettings("", read_timeout_s=1.2, first_byte_timeout_s=0.3)
    async with scripted(mute) as (url, _):
        settings = dataclasses.replace(settings, base_url=url)
        async with TargetClient(settings) as client:
            started = time.monotonic()
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            streamed = await client.chat({**body, "stream": True}, "s")
            streamed_s = time.monotonic() - started
            got = await client.get("/v1/models", "g")
            started = time.monotonic()
            plain = await client.chat(body, "p")
            plain_s = time.monotonic() - started
    for record in (streamed, got):
        assert record.failure is not None
        assert record.failure.kind is FailureKind.TIMEOUT
        assert "no data for 0.3 s after sending" in record.failure.message
        assert "did not begin answering" in record.failure.message
    assert 0.25 < streamed_s < 1.0
    assert plain.failure is not None
    assert "no data for 1.2 s" in plain.failure.message
    assert plain_s > 1.1


async def test_a_kept_alive_connection_times_out_each_request_at_its_own_limits() -> None:
    """On one kept-alive connection, answered requests leave no timeout behind to cut the
    next, and a request the server then never begins answering is still cut at its
    first-byte limit counted from its own send, as is one that goes silent at the read
    timeout."""
    answered = 0

    async def answer_three_then_mute(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal answered
        answered += 1
        if answered == 4:
            await asyncio.sleep(5)  # takes the request, never answers
        elif answered == 5:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(5)  # begins, then goes silent
        else:
            await paced_stream(reader, writer)

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with scripted(answer_three_then_mute) as (url, server):
        settings = ClientSettings(url, read_timeout_s=0.6, first_byte_timeout_s=0.3)
        async with TargetClient(settings) as client:
            for _ in range(3):  # each well inside the limits, together past them
                record = await client.chat(body, "ok")
                assert record.ok
                await asyncio.sleep(0.15)
            started = time.monotonic()
            mute = await client.chat(body, "mute")
            mute_s = time.monotonic() - started
            started = time.monotonic()
            silent = await client.chat(body, "silent")
            silent_s = time.monotonic() - started
    assert server.connections == 2  # the mute one was kept alive; it is closed after
    assert mute.failure is not None
    assert "no data for 0.3 s after sending" in mute.failure.message
    assert 0.25 < mute_s < 0.9
    assert silent.failure is not None
    assert silent.failure.kind is FailureKind.TIMEOUT
    assert "no data for 0.6 s" in silent.failure.message
    assert 0.55 < silent_s < 1.5


async def test_slow_drip_is_not_a_read_timeout_but_the_deadline_stops_it() -> None:
    """Bytes every 0.1 s keep a 0.3 s read timeout happy; a 0.5 s deadline ends the request
    and the chunks that came before it stay on the record."""

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(50):
            writer.write(_chunk(SSE[0]))
            await writer.drain()
            await asyncio.sleep(0.1)

    body = {"model": "m", "messages": [], "stream": True}
    async with (
        scripted(drip) as (url, _),
        TargetClient(ClientSettings(url, read_timeout_s=0.3)) as client,
    ):
        record = await client.chat(body, "t", deadline_s=0.5)
    assert record.failure is not None
    assert record.failure.kind is FailureKind.TIMEOUT
    assert "client deadline of 0.5 s" in record.failure.message
    assert 3 <= len(record.chunks) <= 7


async def test_garbage_answer_is_a_transport_failure() -> None:
    """An answer that is not HTTP is a transport failure."""

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()

    async with scripted(garbage) as (url, _):
        record = await _chat(url)
    assert record.failure is not None
    assert record.failure.kind is FailureKind.TRANSPORT
    assert "malformed HTTP answer" in record.failure.message


async def test_pool_never_opens_more_than_its_limit() -> None:
    """Eight requests at once never open more connections than the pool's limit."""

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        await json_answer(reader, writer)

    async with (
        scripted(slow) as (url, server),
        TargetClient(ClientSettings(url, max_connections=2)) as client,
    ):
        records = await asyncio.gather(*(client.get("/x", "x") for _ in range(8)))
    assert all(r.ok for r in records)
    assert server.peak_open <= 2
    assert server.connections == 2


async def test_unreachable_port_is_a_connect_failure() -> None:
    """A closed port is a connect failure."""
    async with scripted(json_answer) as (url, _):
        pass  # the listener is closed now
    record = await _chat(url)
    assert record.failure is not None
    assert record.failure.kind is FailureKind.CONNECT
    assert "cannot connect" in record.failure.message


def test_constant_arrivals_are_evenly_spaced_and_capped() -> None:
    """Constant arrivals are evenly spaced and stop at the request cap; Poisson arrivals keep the
    rate."""
    schedule = Schedule("rate", 10, 5, rate_per_s=250, arrival="constant")
    assert list(arrival_offsets_ns(schedule)) == [0, 4_000_000, 8_000_000, 12_000_000, 16_000_000]
    poisson = list(arrival_offsets_ns(Schedule("rate", 10, 1000, rate_per_s=100, seed=3)))
    assert len(poisson) == 1000
    assert 8 < poisson[-1] / 1e9 < 12  # 1000 arrivals at 100/s take about 10 s


async def half_stream_then_hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(SSE[0]))
    await writer.drain()
    await reader.read()  # until the client goes away


async def test_abort_in_flight_returns_records_and_stop_refuses_new_requests() -> None:
    """Aborted requests still come back as records (cancelled, with what had arrived), so
    a caller saves them; after `stop` nothing more leaves."""
    body = {"model": "m", "messages": [], "stream": True}
    async with (
        scripted(half_stream_then_hang) as (url, server),
        TargetClient(ClientSettings(url)) as client,
    ):
        pending = [asyncio.ensure_future(client.chat(body, f"t{i}")) for i in range(3)]
        while server.open_now < 3 or client.in_flight < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert client.stop("interrupted by SIGTERM") == 3
        records = await asyncio.wait_for(asyncio.gather(*pending), 1)
        with pytest.raises(asyncio.CancelledError):
            await client.chat(body, "late")
        await asyncio.sleep(0.05)
        assert server.open_now == 0
    assert len(server.requests) == 3
    for record in records:
        assert record.failure is not None
        assert record.failure.kind is FailureKind.CANCELLED
        assert "interrupted by SIGTERM" in record.failure.message
        assert record.chunks  # the first event had arrived
    assert client.chat_requests == 3


async def test_saved_requests_redact_credential_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key goes to the server but every credential header is redacted in the saved request."""
    monkeypatch.setenv("GOLIVE_TEST_KEY", "sk-secret-value")
    async with scripted(json_answer) as (url, server):
        settings = ClientSettings(url, api_key_env="GOLIVE_TEST_KEY")
        async with TargetClient(settings) as client:
            record = await client.chat(
                {"model": "m", "messages": []}, "t", headers={"X-Api-Key": "k2", "X-Trace": "a"}
            )
    assert b"Authorization: Bearer sk-secret-value" in server.requests[0]
    saved = parse(record).saved_line().request_headers
    assert saved is not None
    assert saved["Authorization"] == "***REDACTED***"
    assert saved["X-Api-Key"] == "***REDACTED***"
    assert saved["X-Trace"] == "a"
    assert saved["X-Request-Id"] == record.request_id


def test_the_engine_runs_on_uvloop() -> None:
    """Ray's async actors run on uvloop, whose transports are not asyncio.Transport."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> RequestRecord:
        async with scripted(paced_stream) as (url, _):
            return await _chat(url)

    record = uvloop.run(main())
    assert record.ok
    stream = parse(record).stream
    assert stream is not None
    assert stream.done
