"""The async OpenAI-compatible client: one shared connection pool, raw bytes, exact stamps.

`TargetClient` is the only place golive talks HTTP to the server under test. It never parses
on the hot path: it stamps `perf_counter_ns` as each body chunk comes off the socket buffer
and keeps the bytes. Transport failures become `Failure`s on the record, never exceptions,
so a load phase always finishes with a full account of what happened.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp

from golive.errors import ConfigError
from golive.traffic.records import Failure, FailureKind, RequestRecord, Timings

READ_BUFFER_BYTES = 4 * 1024 * 1024
_KEPT_HEADERS = ("x-request-id", "content-type", "server", "retry-after")


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Connection settings; the API key is read from `api_key_env` and nowhere else."""

    base_url: str
    api_key_env: str | None = None
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0
    max_connections: int = 256


def read_api_key(env_name: str | None) -> str | None:
    """Read the API key from the named environment variable; never from argv or files."""
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError(
            f"--api-key-env names {env_name!r}, but that environment variable is unset or "
            f"empty; export {env_name}=<key> before running golive"
        )
    return value


class TargetClient:
    """Async client over one `aiohttp.ClientSession`; use as `async with TargetClient(...)`."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.base_url = settings.base_url.rstrip("/")
        self._api_key = read_api_key(settings.api_key_env)
        self._session: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)
        self._run_tag = uuid.uuid4().hex[:8]

    async def __aenter__(self) -> Self:
        headers = {"User-Agent": "golive"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=self.settings.max_connections, limit_per_host=0, enable_cleanup_closed=True
            ),
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=None,
                connect=self.settings.connect_timeout_s,
                sock_read=self.settings.read_timeout_s,
            ),
            read_bufsize=READ_BUFFER_BYTES,
            max_line_size=READ_BUFFER_BYTES,
            max_field_size=READ_BUFFER_BYTES,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

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
            "/v1/chat/completions",
            body,
            label,
            bool(body.get("stream")),
            scheduled_ns,
            deadline_s,
            headers,
        )

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
        if self._session is None:
            raise RuntimeError("TargetClient used outside `async with`")
        request_id = self.next_request_id(label)
        url = self.url(path)
        started_at = time.time()
        sent_ns = time.perf_counter_ns()
        scheduled = scheduled_ns if scheduled_ns is not None else sent_ns
        chunks: list[bytes] = []
        chunk_ns: list[int] = []
        status: int | None = None
        headers: dict[str, str] | None = None
        headers_ns: int | None = None
        failure: Failure | None = None
        sent_headers = {**(extra_headers or {}), "X-Request-Id": request_id}
        deadline = asyncio.timeout(deadline_s)
        try:
            async with (
                deadline,
                self._session.request(method, url, json=body, headers=sent_headers) as response,
            ):
                headers_ns = time.perf_counter_ns()
                status = response.status
                headers = {k: response.headers[k] for k in _KEPT_HEADERS if k in response.headers}
                async for chunk in response.content.iter_any():
                    chunk_ns.append(time.perf_counter_ns())
                    chunks.append(chunk)
                if not 200 <= status < 300:
                    failure = Failure(FailureKind.HTTP_STATUS, f"HTTP {status} {response.reason}")
        except TimeoutError as exc:
            if deadline.expired():
                failure = Failure(
                    FailureKind.TIMEOUT,
                    f"client deadline of {deadline_s:g} s passed; gave up and closed the "
                    f"connection after {len(chunks)} chunk(s)",
                )
            else:
                failure = Failure(FailureKind.TIMEOUT, f"no data for {self._timeout_text()}: {exc}")
        except asyncio.CancelledError:
            failure = Failure(FailureKind.CANCELLED, "stopped by the schedule before an answer")
            raise
        except aiohttp.ClientConnectorError as exc:
            failure = Failure(FailureKind.CONNECT, f"cannot connect to {url}: {exc.os_error}")
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
            failure = Failure(FailureKind.DISCONNECTED, f"connection closed mid-answer: {exc}")
        except aiohttp.ClientError as exc:
            failure = Failure(FailureKind.TRANSPORT, f"{type(exc).__name__}: {exc}")
        finally:
            end_ns = time.perf_counter_ns()
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
                sent_ns=sent_ns,
                headers_ns=headers_ns,
                first_byte_ns=chunk_ns[0] if chunk_ns else None,
                end_ns=end_ns,
                chunk_ns=tuple(chunk_ns),
            ),
            status=status,
            headers=headers,
            chunks=tuple(chunks),
            failure=failure,
        )

    def _timeout_text(self) -> str:
        s = self.settings
        return f"{s.read_timeout_s:g} s (read) / {s.connect_timeout_s:g} s (connect)"
