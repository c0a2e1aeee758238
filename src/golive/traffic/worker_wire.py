"""What a `--workers` process hands the main process for each answer, and how it crosses
the pipe: the answer without its raw bytes (`for_main`), a batch as MessagePack
(`to_main`), read back in the main process (`from_worker`). docs/performance.md, "The
hand-off, step by step"."""

from __future__ import annotations

import dataclasses

import msgspec

from golive.traffic.records import ParsedResponse, RequestRecord, redact_headers

Batch = list[tuple[ParsedResponse, str]]
_WIRE = msgspec.msgpack.Encoder()
_UNWIRE = msgspec.msgpack.Decoder(Batch)


def to_main(batch: Batch) -> bytes | Batch:
    """A batch of answers as it crosses the pipe: MessagePack (msgspec, ~2.4 µs a record to
    write and ~4.8 µs to read, against pickle's ~10 and ~14: the dataclasses' pickling runs
    in Python; bench/handoff-xeon.json). What MessagePack cannot hold (an integer past 64
    bits, a lone surrogate in a server's JSON) sends the batch pickled instead, whole."""
    try:
        return _WIRE.encode(batch)
    except (TypeError, OverflowError, ValueError):
        return batch


def from_worker(payload: bytes | Batch) -> Batch:
    """`to_main`'s batch again, in the main process."""
    return _UNWIRE.decode(payload) if isinstance(payload, bytes) else payload


def for_main(parsed: ParsedResponse) -> ParsedResponse:
    """A worker's answer as the main process judges it: the bundle line carries what is kept,
    so an answer that succeeded travels without its raw stream bytes, request body and
    headers (its timings, status, reassembled answer and problems stay). That is 1-2 KB a
    record instead of 10-30 KB. Built field by field (2.8 µs, against 5.0 for
    `dataclasses.replace`: bench/handoff-xeon.json); a test holds that every other field
    arrives. A failed answer travels whole, as a finding may quote its words, but for the
    credentials in the headers it was sent with: the API key stays in the worker."""
    record = parsed.record
    if not record.ok:
        sent = record.sent_headers
        redacted = None if sent is None else redact_headers(sent)
        if redacted == sent:
            return parsed
        return dataclasses.replace(
            parsed, record=dataclasses.replace(record, sent_headers=redacted)
        )
    slim = RequestRecord(
        request_id=record.request_id,
        label=record.label,
        method=record.method,
        url=record.url,
        body=None,
        stream=record.stream,
        started_at=record.started_at,
        timings=record.timings,
        status=record.status,
        failure=record.failure,
        resent=record.resent,
    )
    return ParsedResponse(
        slim,
        parsed.json_body,
        parsed.stream,
        parsed.server_request_id,
        parsed.first_token_ns,
        parsed.problems,
    )
