"""The async OpenAI-compatible client: one shared connection pool, raw bytes, exact stamps.

`TargetClient` is the only place golive talks HTTP to the server under test. It never parses
on the hot path: it stamps `perf_counter_ns` as each body chunk comes off the socket buffer
and keeps the bytes. Transport failures become `Failure`s on the record, never exceptions,
so a load phase always finishes with a full account of what happened.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import ssl
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from golive.env_names import shown_env_name
from golive.errors import ConfigError
from golive.traffic.http1 import (
    Broken,
    ConnectFailed,
    Disconnected,
    Exchange,
    FirstByteTimedOut,
    Origin,
    Pool,
    ReadTimedOut,
    request_bytes,
)
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings

_KEPT_HEADERS = ("x-request-id", "content-type", "server", "retry-after", "location")
CHAT_PATH = "/v1/chat/completions"
# a request body as `json.dumps(body, separators=(",", ":"), ensure_ascii=False)` writes it,
# its encoder made once
_BODY_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_ROUTES_KEPT = 64


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Connection settings; the API key is read from `api_key_env` and nowhere else."""

    base_url: str
    api_key_env: str | None = None
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0
    max_connections: int = 256
    request_deadline_s: float | None = None  # whole-request limit when the caller sets none
    # the longest wait for an answer's first byte where one comes at once (a GET, a
    # streamed answer's headers); None: the read timeout
    first_byte_timeout_s: float | None = None
    max_response_bytes: int = 256 << 20


def read_api_key(env_name: str | None) -> str | None:
    """Read the API key from the named environment variable; never from argv or files."""
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        name = shown_env_name(env_name)
        raise ConfigError(
            f"--api-key-env names {name}, but that environment variable is unset or empty; "
            "export it (the key as its value) before running golive"
        )
    return value


class TargetClient:
    """Async client over one connection pool per origin; use as `async with TargetClient(...)`."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.base_url = settings.base_url.rstrip("/")
        self._api_key = read_api_key(settings.api_key_env)
        self._pools: dict[Origin, Pool] | None = None
        self._routes: dict[str, tuple[Pool, str]] = {}  # URL -> its pool and request target
        self._headers: dict[str, str] = {}
        self._ssl: ssl.SSLContext | None = None
        self._ids = itertools.count(1)
        self._run_tag = uuid.uuid4().hex[:8]
        self._live: dict[asyncio.Timeout, str | None] = {}  # in flight -> why it was aborted
        self._stopping: str | None = None
        self.chat_requests = 0  # chat completions started and answered with a record

    async def __aenter__(self) -> Self:
        self._headers = {"User-Agent": "golive", "Accept": "*/*"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._pools, self._routes = {}, {}
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for pool in (self._pools or {}).values():
            pool.close()
        self._pools, self._routes = None, {}

    def abort_in_flight(self, reason: str) -> int:
        """End every request in flight now; each still returns its record, with a
        `cancelled` failure naming `reason` and whatever had arrived. Returns how many."""
        loop = asyncio.get_running_loop()
        aborted = 0
        for deadline, why in self._live.items():
            if why is None:
                self._live[deadline] = reason
                deadline.reschedule(loop.time())
                aborted += 1
        return aborted

    def stop(self, reason: str) -> int:
        """Abort what is in flight and send nothing more (golive is stopping): a later
        request raises `CancelledError` before any byte leaves."""
        self._stopping = reason
        return self.abort_in_flight(reason)

    @property
    def in_flight(self) -> int:
        return len(self._live)

    @property
    def connections_opened(self) -> int:
        """Connections opened so far, all origins (a measure of keep-alive reuse)."""
        return sum(pool.opened for pool in (self._pools or {}).values())

    def url(self, path: str) -> str:
        """Absolute URL for a path; full URLs (e.g. a separate metrics URL) pass through."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}{path}"

    def next_request_id(self, label: str) -> str:
        return f"golive-{self._run_tag}-{label}-{next(self._ids)}"

    async def get(self, path: str, label: str) -> RequestRecord:
        """GET a path (health, version, models, metrics) and keep the whole answer."""
        return await self._send("GET", path, None, label, stream=False)

    async def post(self, path: str, body: Mapping[str, Any], label: str) -> RequestRecord:
        """POST JSON to another endpoint (e.g. `/tokenize`) and keep the whole answer."""
        return await self._send("POST", path, body, label, stream=False)

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        """POST one chat completion; streamed when the body says `"stream": true`.

        `deadline_s` is a client's whole-request timeout: past it the client gives up and
        closes the connection, keeping what had arrived (a TIMEOUT failure)."""
        return await self._send(
            "POST",
            CHAT_PATH,
            body,
            label,
            bool(body.get("stream")),
            scheduled_ns,
            deadline_s,
            headers,
        )

    def _pool(self, url: str) -> tuple[Pool, str]:
        """The pool of a URL's origin and the request target (path and query) to send."""
        if self._pools is None:
            raise RuntimeError("TargetClient used outside `async with`")
        route = self._routes.get(url)
        if route is not None:
            return route
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"target URL {url!r} is not an http(s) URL with a host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        origin = Origin(parts.scheme, parts.hostname, port)
        pool = self._pools.get(origin)
        if pool is None:
            if origin.scheme == "https" and self._ssl is None:
                self._ssl = ssl.create_default_context()
            s = self.settings
            pool = Pool(
                origin,
                s.max_connections,
                s.connect_timeout_s,
                s.read_timeout_s,
                self._ssl,
                s.max_response_bytes,
            )
            self._pools[origin] = pool
        target = parts.path or "/"
        route = pool, f"{target}?{parts.query}" if parts.query else target
        if len(self._routes) < _ROUTES_KEPT:  # a load sends to a few URLs, over and over
            self._routes[url] = route
        return route

    async def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        label: str,
        stream: bool,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        if self._stopping is not None:
            raise asyncio.CancelledError(f"golive is stopping ({self._stopping}): not sent")
        request_id = self.next_request_id(label)
        url = self.url(path)
        pool, target = self._pool(url)
        headers = {**self._headers, **(extra_headers or {}), "X-Request-Id": request_id}
        payload: bytes | None = None
        if body is not None:
            payload = _BODY_JSON.encode(body).encode()
            headers["Content-Type"] = "application/json"
        raw = request_bytes(method, target, pool.origin, headers, payload)
        started_at = time.time()
        sent_ns = time.perf_counter_ns()
        scheduled = scheduled_ns if scheduled_ns is not None else sent_ns
        ex = Exchange()
        failure: Failure | None = None
        limit = deadline_s if deadline_s is not None else self.settings.request_deadline_s
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                self._live[deadline] = None
                await pool.exchange(raw, ex, self._first_byte_s(method, path, stream))
            if ex.status is not None and not 200 <= ex.status < 300:
                failure = Failure(FailureKind.HTTP_STATUS, f"HTTP {ex.status} {ex.reason}".rstrip())
        except TimeoutError:
            aborted = self._live.get(deadline)
            failure = (
                Failure(
                    FailureKind.CANCELLED,
                    f"stopped by golive ({aborted}) after {len(ex.chunks)} chunk(s)",
                )
                if aborted is not None
                else Failure(
                    FailureKind.TIMEOUT,
                    f"client deadline of {limit:g} s passed; gave up and closed the "
                    f"connection after {len(ex.chunks)} chunk(s)",
                )
            )
        except asyncio.CancelledError:
            raise
        except ConnectFailed as exc:
            failure = Failure(FailureKind.CONNECT, f"cannot connect to {url}: {exc}")
        except FirstByteTimedOut as exc:
            failure = Failure(
                FailureKind.TIMEOUT,
                f"no data for {exc} s after sending: the server took the request and did not "
                "begin answering (client.first_byte_timeout_s, at most target.read_timeout_s)",
            )
        except ReadTimedOut:
            failure = Failure(FailureKind.TIMEOUT, f"no data for {self._timeout_text()}")
        except Disconnected as exc:
            failure = Failure(FailureKind.DISCONNECTED, f"connection closed mid-answer: {exc}")
        except Broken as exc:
            failure = Failure(FailureKind.TRANSPORT, f"{type(exc).__name__}: {exc}")
        finally:
            self._live.pop(deadline, None)
        end_ns = time.perf_counter_ns()
        if path == CHAT_PATH:
            self.chat_requests += 1
        return RequestRecord(
            request_id=request_id,
            label=label,
            method=method,
            url=url,
            body=body,
            stream=stream,
            started_at=started_at,
            timings=Timings(
                scheduled_ns=scheduled,
                sent_ns=ex.written_ns or sent_ns,
                headers_ns=ex.headers_ns,
                first_byte_ns=ex.chunk_ns[0] if ex.chunk_ns else None,
                end_ns=end_ns,
                chunk_ns=tuple(ex.chunk_ns),
            ),
            status=ex.status,
            headers={k: ex.headers[k] for k in _KEPT_HEADERS if k in ex.headers} or None,
            chunks=tuple(ex.chunks),
            failure=failure,
            sent_headers=headers,
            resent=ex.resent,
        )

    def _first_byte_s(self, method: str, path: str, stream: bool) -> float | None:
        """The first-byte limit of one request: every request but a plain (not streamed) chat
        completion, whose first byte is its whole answer (bounded by the read timeout and the
        request deadline instead)."""
        if stream or method == "GET" or path != CHAT_PATH:
            return self.settings.first_byte_timeout_s
        return None

    def _timeout_text(self) -> str:
        s = self.settings
        return f"{s.read_timeout_s:g} s (read) / {s.connect_timeout_s:g} s (connect)"
