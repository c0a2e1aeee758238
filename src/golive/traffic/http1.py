"""HTTP/1.1 keep-alive transport for the traffic engine: asyncio protocols + llhttp.

The hot path of every load phase. One `Pool` per origin holds keep-alive connections up to
a limit; a request is one `transport.write` of pre-built bytes, and the answer is parsed by
`httptools` (llhttp, the parser Node.js uses) inside `data_received`, where each socket
read is stamped with `perf_counter_ns` before anything else happens. Body bytes are kept
raw, one chunk per socket read; nothing is decoded here. Reads are never paused, so a long
stream is never throttled by a small buffer.

Failures come back as `Exchange.error` (`Broken` subclasses), never as a half-used
connection: a connection is reused only after a complete, keep-alive answer. A server may
still close a kept-alive connection just as it is reused (its idle timeout, or an error after
the previous answer: uvicorn closes the connection when the app raises after responding);
then nothing of the request was answered, and it goes once more on a fresh connection, as
HTTP clients do (`Exchange.resent` says so on the record).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from dataclasses import dataclass, field
from typing import cast

import httptools


class Broken(Exception):
    """The exchange failed; subclasses say how (mapped to `FailureKind` by the client)."""


class ConnectFailed(Broken):
    pass


class ReadTimedOut(Broken):
    pass


class FirstByteTimedOut(ReadTimedOut):
    """Not one byte of the answer within the first-byte limit: the server took the request
    and never began answering."""


class Disconnected(Broken):
    pass


class BadResponse(Broken):
    pass


class TooLarge(Broken):
    pass


@dataclass(slots=True)
class Exchange:
    """What one request/answer left: status line, headers, raw body chunks and stamps.

    `written_ns` is taken just before the request's bytes go to the socket (after any
    connection setup), so time-to-first-byte is the server's and the network's only."""

    status: int | None = None
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    written_ns: int | None = None
    headers_ns: int | None = None
    chunks: list[bytes] = field(default_factory=list)
    chunk_ns: list[int] = field(default_factory=list)
    received: int = 0  # bytes read off the socket for this answer, headers included
    resent: bool = False  # sent again after a reused connection closed before answering


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


class _Connection(asyncio.Protocol):
    """One keep-alive connection; serves one exchange at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_bytes: int) -> None:
        self._loop = loop
        self._max_bytes = max_bytes
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._exchange = Exchange()
        self._pieces: list[bytes] = []
        self._header_name = b""
        self._done: asyncio.Future[None] | None = None
        self._reusable = False
        self.last_read_ns = 0
        self._complete = False
        self._delimited = False
        # the connection's one timer (`_watch`): armed while an exchange may still time out
        self._timer: asyncio.TimerHandle | None = None
        self._first_ns = self._read_ns = 0

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (Ray's actors run on uvloop) do not subclass asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.last_read_ns = now
        if self._done is None or self._done.done():
            self._fail(BadResponse("the server sent bytes with no request outstanding"))
            return
        self._exchange.received += len(data)
        if self._exchange.received > self._max_bytes:
            self._fail(TooLarge(f"the answer passed {self._max_bytes:,} bytes; golive cut it"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadResponse("the server switched protocols"))
            return
        except httptools.HttpParserError as exc:
            self._fail(BadResponse(f"malformed HTTP answer: {exc}"))
            return
        if self._pieces:
            ex = self._exchange
            ex.chunks.append(self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces))
            ex.chunk_ns.append(now)
            self._pieces = []
        if self._complete and self._done is not None and not self._done.done():
            self._done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._unwatch()
        done = self._done
        if done is None or done.done():
            return
        if self._exchange.headers_ns is not None and not self._delimited:
            self._complete = True  # an answer delimited by closing the connection
            self._reusable = False
            done.set_result(None)
            return
        where = "mid-answer" if self._exchange.headers_ns is not None else "before answering"
        detail = f": {exc}" if exc else ""
        done.set_exception(Disconnected(f"the server closed the connection {where}{detail}"))

    # -- httptools callbacks -----------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        self._exchange.headers[key] = value.decode("latin-1")

    def on_status(self, status: bytes) -> None:
        self._exchange.reason = status.decode("latin-1")

    def on_headers_complete(self) -> None:
        ex = self._exchange
        ex.headers_ns = self.last_read_ns  # stamped by the read that is being parsed
        ex.status = self._parser.get_status_code()
        headers = ex.headers
        self._delimited = (
            "content-length" in headers
            or "chunked" in headers.get("transfer-encoding", "").lower()
            or ex.status in (204, 304)
            or 100 <= ex.status < 200
        )

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._reusable = self._parser.should_keep_alive()

    # -- used by the pool --------------------------------------------------------------
    def start(
        self, payload: bytes, exchange: Exchange, first_ns: int, read_ns: int
    ) -> asyncio.Future[None]:
        """Send one request; the future ends with its answer, or with `FirstByteTimedOut`
        when no byte of it has come within `first_ns`, `ReadTimedOut` when none has come for
        `read_ns` since the last."""
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._exchange = exchange
        self._pieces = []
        self._complete = False
        self._reusable = False
        self._delimited = False
        self._done = self._loop.create_future()
        self.last_read_ns = exchange.written_ns = time.perf_counter_ns()
        self._watch(first_ns, read_ns)
        self.transport.write(payload)
        return self._done

    def _watch(self, first_ns: int, read_ns: int) -> None:
        """Have the timer fire by this exchange's first-byte deadline. A timer still armed
        from an earlier exchange that fires sooner is kept (firing, it re-arms for what is
        left), so a kept-alive connection does not make and cancel a timer per request."""
        self._first_ns, self._read_ns = first_ns, read_ns
        due = self._loop.time() + first_ns / 1e9
        timer = self._timer
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._timer = self._loop.call_at(due, self._check)

    def _check(self) -> None:
        """The timer fired: fail the exchange in flight whose first byte has not come within
        its limit, or that has had no byte for the read timeout; else re-arm for what is
        left of the nearer limit. Nothing in flight: the timer stays off."""
        self._timer = None
        done = self._done
        if done is None or done.done() or self.closed:
            return
        ex = self._exchange
        now_ns = time.perf_counter_ns()
        if not ex.received:
            left_ns = self._first_ns - (now_ns - (ex.written_ns or now_ns))
            if left_ns <= 0:
                done.set_exception(FirstByteTimedOut(f"{self._first_ns / 1e9:g}"))
                return
        else:
            left_ns = self._read_ns - (now_ns - self.last_read_ns)
            if left_ns <= 0:
                done.set_exception(ReadTimedOut("no data"))
                return
        self._timer = self._loop.call_later(left_ns / 1e9, self._check)

    def _unwatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def finish(self) -> bool:
        """Whether the connection may carry another request."""
        return self._reusable and not self.closed

    def _fail(self, error: Broken) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        self._unwatch()
        if self.transport is not None:
            self.transport.abort()


class Pool:
    """Keep-alive connections to one origin, at most `limit` open at once."""

    def __init__(
        self,
        origin: Origin,
        limit: int,
        connect_timeout_s: float,
        read_timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        max_bytes: int = 256 << 20,
    ) -> None:
        self.origin = origin
        self.max_bytes = max_bytes
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_ns = int(read_timeout_s * 1e9)
        self._slots = asyncio.Semaphore(limit)
        self._idle: collections.deque[_Connection] = collections.deque()
        self._ssl = ssl_context if origin.scheme == "https" else None
        self.opened = 0
        self.resent = 0

    async def exchange(
        self, payload: bytes, into: Exchange, first_byte_s: float | None = None
    ) -> None:
        """Send one request (already serialised) and read its whole answer into `into`.
        `first_byte_s`: the longest wait for the answer's first byte (never longer than the
        read timeout, which bounds it when None).

        On failure `into` keeps what had arrived, and the connection is closed."""
        first_ns = self.read_timeout_ns
        if first_byte_s is not None:
            first_ns = min(first_ns, int(first_byte_s * 1e9))
        async with self._slots:
            conn = self._kept_alive()
            if conn is None:
                await self._exchange_on(await self._open(), payload, into, first_ns)
                return
            try:
                await self._exchange_on(conn, payload, into, first_ns)
            except Disconnected:
                if into.received:
                    raise
                into.resent = True
                self.resent += 1
                await self._exchange_on(await self._open(), payload, into, first_ns)

    async def _exchange_on(
        self, conn: _Connection, payload: bytes, into: Exchange, first_ns: int
    ) -> None:
        try:
            # the wait for the answer: failed by the connection's timer when its first byte
            # has not come within `first_ns`, or no byte for the read timeout after it
            await conn.start(payload, into, first_ns, self.read_timeout_ns)
        except BaseException:
            conn.abort()
            raise
        if conn.finish():
            self._idle.append(conn)
        else:
            conn.abort()

    def _kept_alive(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.abort()
        return None

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        o = self.origin
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(loop, self.max_bytes),
                    o.host,
                    o.port,
                    ssl=self._ssl,
                    server_hostname=o.host if self._ssl else None,
                )
        except TimeoutError as exc:
            raise ConnectFailed(f"no connection within {self.connect_timeout_s:g} s") from exc
        except OSError as exc:
            raise ConnectFailed(str(exc) or type(exc).__name__) from exc
        self.opened += 1
        return protocol

    def close(self) -> None:
        while self._idle:
            self._idle.pop().abort()


def request_bytes(
    method: str,
    path: str,
    origin: Origin,
    headers: dict[str, str],
    body: bytes | None,
) -> bytes:
    """Serialise one HTTP/1.1 request (headers must not contain CR or LF)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {origin.host_header}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name!r} contains a line break")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head
