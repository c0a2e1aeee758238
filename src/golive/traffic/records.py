"""What one request leaves behind: bodies, status, server request id, timings, error.

Records are built on the hot path from raw bytes and `perf_counter_ns` stamps only; parsing
(JSON bodies, SSE reassembly) happens in `parse` after the load, when time no longer matters.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET, UnsetType

from golive.bundle.request_line import SAMPLED_OUT, RecordFailure, RecordTimings, RequestRecordLine
from golive.bundle.store import REDACTED
from golive.traffic.body_sample import answer_summary, body_digest
from golive.traffic.sse import read_stream, token_ids
from golive.traffic.stream_result import StreamResult

NS_PER_MS = 1_000_000
_CREDENTIAL = re.compile("auth|key|token|cookie|secret|password|signature", re.IGNORECASE)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as saved in the bundle: any credential-bearing header's value replaced."""
    return {name: REDACTED if _bears_credential(name) else value for name, value in headers.items()}


@functools.lru_cache(maxsize=1024)
def _bears_credential(name: str) -> bool:
    """Whether a header of this name carries a credential (every record has the same few
    names: each is matched once)."""
    return _CREDENTIAL.search(name) is not None


class FailureKind(enum.StrEnum):
    """Why a request did not produce a complete answer."""

    CONNECT = "connect"  # refused, unreachable, DNS
    TIMEOUT = "timeout"  # no answer (or no next chunk) within the read timeout
    DISCONNECTED = "disconnected"  # the server closed the connection mid-answer
    HTTP_STATUS = "http_status"  # a non-2xx answer
    TRANSPORT = "transport"  # any other transport failure
    CANCELLED = "cancelled"  # the schedule stopped before an answer


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    message: str


@dataclass(frozen=True, slots=True)
class Timings:
    """Monotonic `perf_counter_ns` stamps; `None` where the moment never came."""

    scheduled_ns: int
    sent_ns: int
    headers_ns: int | None = None
    first_byte_ns: int | None = None
    end_ns: int | None = None
    chunk_ns: tuple[int, ...] = ()
    # a retried request's last attempt: when its first attempt was meant to leave, so its
    # latency from the intended time spans every attempt and backoff (what the user waited)
    first_intended_ns: int | None = None

    def ms_since_sent(self, stamp: int | None) -> float | None:
        return None if stamp is None else (stamp - self.sent_ns) / NS_PER_MS

    def ms_since_intended(self, stamp: int | None) -> float | None:
        """From the moment the schedule meant the request to leave (for a closed loop, the
        moment its slot was free: the same as sent, to microseconds); for a retried
        request's last attempt, from when its first attempt was meant to."""
        start = self.scheduled_ns if self.first_intended_ns is None else self.first_intended_ns
        return None if stamp is None else (stamp - start) / NS_PER_MS


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as sent and as answered, before any parsing."""

    request_id: str
    label: str
    method: str
    url: str
    body: Mapping[str, Any] | None
    stream: bool
    started_at: float
    timings: Timings
    status: int | None = None
    headers: Mapping[str, str] | None = None
    chunks: tuple[bytes, ...] = ()
    failure: Failure | None = None
    sent_headers: Mapping[str, str] | None = None  # as sent; redacted when saved
    resent: bool = False  # a reused connection closed before answering: sent once more

    @property
    def ok(self) -> bool:
        return self.failure is None and self.status is not None and 200 <= self.status < 300

    @property
    def refused(self) -> bool:
        """HTTP 4xx: the server refused the request as it is configured (not its capacity)."""
        return self.status is not None and 400 <= self.status < 500

    @property
    def raw_text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A record's answer after parsing: JSON body, or the reassembled stream."""

    record: RequestRecord
    json_body: Any | None
    stream: StreamResult | None
    server_request_id: str | None
    first_token_ns: int | None
    problems: tuple[str, ...]

    @property
    def ttft_ms(self) -> float | None:
        return self.record.timings.ms_since_sent(self.first_token_ns)

    @property
    def e2e_ms(self) -> float | None:
        return self.record.timings.ms_since_sent(self.record.timings.end_ns)

    @property
    def ttft_from_intended_ms(self) -> float | None:
        """Time to first token from when the schedule meant to send the request (a rate
        schedule's request the client sent late waited too: coordinated omission)."""
        return self.record.timings.ms_since_intended(self.first_token_ns)

    @property
    def e2e_from_intended_ms(self) -> float | None:
        """Latency from the intended send time (AIPerf's effective latency)."""
        return self.record.timings.ms_since_intended(self.record.timings.end_ns)

    @property
    def completion(self) -> dict[str, Any] | None:
        """The answer in `chat.completion` shape, whichever way it was delivered."""
        if self.stream is not None:
            return self.stream.as_completion()
        return self.json_body if isinstance(self.json_body, dict) else None

    @property
    def usage(self) -> Mapping[str, Any] | None:
        body = self.completion
        usage = body.get("usage") if body else None
        return usage if isinstance(usage, dict) else None

    @property
    def prompt_token_ids(self) -> tuple[int, ...] | None:
        """The prompt as the engine tokenized it (vLLM's `return_token_ids`), or None: the
        request did not ask, the engine does not say, or a gateway dropped the field."""
        if self.stream is not None:
            return self.stream.prompt_token_ids
        return token_ids((self.completion or {}).get("prompt_token_ids"))

    @property
    def prompt_text(self) -> str | None:
        """The prompt as the engine rendered it (vLLM's `return_prompt_text`), or None."""
        if self.stream is not None:
            return self.stream.prompt_text
        text = (self.completion or {}).get("prompt_text")
        return text if isinstance(text, str) else None

    @property
    def cached_tokens(self) -> int | None:
        """usage.prompt_tokens_details.cached_tokens; None where the server does not report it
        (vLLM's default, without --enable-prompt-tokens-details)."""
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        return details.get("cached_tokens") if isinstance(details, dict) else None

    def saved_line(self, full: bool = True) -> RequestRecordLine:
        """The line saved under `requests/` in the bundle (`request_line.line_text` writes
        it). Not `full`: the timings, status, ids, usage and failure stay; the bodies become
        their digest and size."""
        record, timings = self.record, self.record.timings
        answer = self.completion
        if answer is None:
            answer = self.json_body
        raw: str | UnsetType = UNSET
        if full and (record.stream or self.json_body is None):
            raw = record.raw_text
        return RequestRecordLine(
            request_id=record.request_id,
            label=record.label,
            method=record.method,
            url=record.url,
            started_at=record.started_at,
            stream=record.stream,
            request_headers=None
            if record.sent_headers is None
            else redact_headers(record.sent_headers),
            request=record.body if full else body_digest(record.body),
            http_status=record.status,
            server_request_id=self.server_request_id,
            response=answer if full else answer_summary(answer),
            timings_ms=RecordTimings(
                schedule_lag=(timings.sent_ns - timings.scheduled_ns) / NS_PER_MS,
                headers=timings.ms_since_sent(timings.headers_ns),
                first_byte=timings.ms_since_sent(timings.first_byte_ns),
                first_token=self.ttft_ms,
                end=self.e2e_ms,
                first_token_from_intended=self.ttft_from_intended_ms,
                end_from_intended=self.e2e_from_intended_ms,
                retry_wait=_retry_wait_ms(timings),
                chunks=tuple((t - timings.sent_ns) / NS_PER_MS for t in timings.chunk_ns)
                if record.stream
                else (),
            ),
            failure=None
            if record.failure is None
            else RecordFailure(record.failure.kind.value, record.failure.message),
            problems=self.problems,
            resent=True if record.resent else UNSET,
            body=UNSET if full else SAMPLED_OUT,
            response_raw=raw,
        )


def _retry_wait_ms(timings: Timings) -> float | UnsetType:
    """A retried request's last attempt: how long before it the first attempt was meant to
    leave (`retry_wait`, ms; the earlier attempts and backoffs), which its times from the
    intended send include. Not written for a first attempt."""
    if timings.first_intended_ns is None:
        return UNSET
    return (timings.scheduled_ns - timings.first_intended_ns) / NS_PER_MS


def reparsed(line: RequestRecordLine) -> ParsedResponse:
    """A saved full record line (`ParsedResponse.saved_line`) parsed again, as `golive decide`
    reads an answer from the bundle: the same status, failure, bodies, problems and timings
    (relative to the send). A line saved without its body (sampled out) cannot be."""
    if line.sampled_out:
        raise ValueError(f"record {line.request_id} was saved without its body")
    timings = line.timings_ms

    def stamp(value: float | None) -> int | None:
        return None if value is None else round(value * NS_PER_MS)

    lag = timings.schedule_lag or 0.0
    waited = timings.retry_wait
    raw = None if isinstance(line.response_raw, UnsetType) else line.response_raw
    if raw is None and line.response is not None:
        raw = json.dumps(line.response, ensure_ascii=False)
    server_id = line.server_request_id
    record = RequestRecord(
        request_id=line.request_id,
        label=line.label,
        method=line.method or "POST",
        url=line.url,
        body=line.request,
        stream=line.stream,
        started_at=line.started_at,
        timings=Timings(
            scheduled_ns=-round(lag * NS_PER_MS),
            first_intended_ns=None
            if not isinstance(waited, float)
            else -round((lag + waited) * NS_PER_MS),
            sent_ns=0,
            headers_ns=stamp(timings.headers),
            first_byte_ns=stamp(timings.first_byte),
            end_ns=stamp(timings.end),
            chunk_ns=tuple(round(t * NS_PER_MS) for t in timings.chunks),
        ),
        status=line.http_status,
        headers=None if server_id is None else {"x-request-id": server_id},
        chunks=(raw.encode(),) if raw else (),
        failure=None
        if line.failure is None
        else Failure(FailureKind(line.failure.kind), line.failure.message),
        resent=line.resent is True,
    )
    parsed = parse(record)
    return ParsedResponse(
        record,
        parsed.json_body,
        parsed.stream,
        parsed.server_request_id,
        stamp(timings.first_token),
        parsed.problems,
    )


def parse(record: RequestRecord) -> ParsedResponse:
    """Parse a record's answer; never raises, problems are listed instead."""
    problems: list[str] = []
    header_id = (record.headers or {}).get("x-request-id")
    if record.stream and record.status is not None and 200 <= record.status < 300:
        stream, leftover = read_stream(record.chunks)
        if leftover:
            problems.append(f"unframed trailing text: {leftover[:120]!r}")
        if stream.malformed:
            problems.append(f"{len(stream.malformed)} stream event(s) are not JSON")
        if stream.error is not None:
            problems.append(f"error event in stream: {stream.error.get('message', stream.error)}")
        elif not stream.done:
            problems.append("stream ended without [DONE]")
        first_token = (
            record.timings.chunk_ns[stream.first_token_chunk]
            if stream.first_token_chunk is not None
            and stream.first_token_chunk < len(record.timings.chunk_ns)
            else None
        )
        return ParsedResponse(
            record, None, stream, header_id or stream.response_id, first_token, tuple(problems)
        )
    body: Any | None = None
    text = record.raw_text
    if text:
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            problems.append(f"body is not JSON: {text[:120]!r}")
        except RecursionError:  # valid JSON nested past the reader's depth
            problems.append(f"body is JSON nested too deeply to read: {text[:120]!r}")
    body_id = body.get("id") if isinstance(body, dict) and record.ok else None
    first_token = record.timings.end_ns if record.ok else None
    return ParsedResponse(
        record,
        body,
        None,
        header_id or (body_id if isinstance(body_id, str) else None),
        first_token,
        tuple(problems),
    )


def error_param(body: Any) -> str | None:
    """The request field an OpenAI/vLLM error body blames (`{"error": {"param": ...}}`)."""
    if not isinstance(body, dict):
        return None
    nested = body.get("error")
    param = (nested if isinstance(nested, dict) else body).get("param")
    return str(param) if param else None


def error_message(body: Any) -> str | None:
    """The error text of an OpenAI/vLLM error body, nested (`{"error":{...}}`) or flat."""
    if not isinstance(body, dict):
        return None
    inner = body.get("error")
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    if isinstance(inner, str):
        return inner
    if body.get("object") == "error" and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body.get("detail"), str):
        return str(body["detail"])
    return None
