"""One line of `requests/<stream>.jsonl`: a request as golive sent it and as it was answered
(issue 32 §3). One struct, `RequestRecordLine`, is the line: the traffic engine writes a
record by encoding it (`line_text`), the judges read one by decoding it (`decode_line`), and
`golive decide` checks every record stream against it before judging (`schemas.py`).

Its fields are the keys on disk, in the order golive writes them. Keys added later are
optional, so older bundles still read: `*_from_intended` (absent: the figure counts from the
send) and the keys written only where they say something (`retry_wait`, `resent`, `body`,
`response_raw`: `UNSET`, left out of the line, where they do not). Keys beyond them are
allowed. A line that is not of the struct is named with its file, line and field ("requests/
smoke.jsonl line 3: Expected `int | null`, got `str` - at `$.http_status`"), never read as a
default.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from golive.bundle.layout import AGENT_FAILURES
from golive.errors import RecordLineError

SAMPLED_OUT = "sampled-out"  # `body`: the line keeps the bodies' digest and size, not the bodies
NOT_RECORDS = (AGENT_FAILURES,)  # under requests/, but examples of failures, not records


class RecordTimings(msgspec.Struct, kw_only=True, frozen=True):
    """`timings_ms`: milliseconds since the request was sent (`schedule_lag`: from when the
    schedule meant it to leave to its send; `*_from_intended`: since that intended moment,
    for a retried request's last attempt since its first attempt's)."""

    schedule_lag: float | None = None
    headers: float | None = None
    first_byte: float | None = None
    first_token: float | None = None
    end: float | None = None
    first_token_from_intended: float | UnsetType | None = UNSET
    end_from_intended: float | UnsetType | None = UNSET
    retry_wait: float | UnsetType | None = UNSET  # a retried request's last attempt
    chunks: tuple[float, ...] = ()  # each streamed read

    @property
    def end_since_intended(self) -> float | None:
        """The end from the intended send (a bundle older than that figure: from the send)."""
        return self.end if isinstance(self.end_from_intended, UnsetType) else self.end_from_intended

    @property
    def first_token_since_intended(self) -> float | None:
        """The first token from the intended send (an older bundle: from the send)."""
        given = self.first_token_from_intended
        return self.first_token if isinstance(given, UnsetType) else given

    @property
    def waited(self) -> float | None:
        """`retry_wait`: how long before this attempt the first one was meant to leave (0.0
        for a first attempt; None where the line states null)."""
        return 0.0 if isinstance(self.retry_wait, UnsetType) else self.retry_wait


class RecordFailure(msgspec.Struct, frozen=True):
    """Why the request got no complete answer (`traffic.records.FailureKind`) and the words."""

    kind: str
    message: str


class RequestRecordLine(msgspec.Struct, kw_only=True, frozen=True):
    """One line of `requests/<stream>.jsonl` (`traffic.records.ParsedResponse.saved_line`)."""

    request_id: str = ""
    label: str
    method: str = ""
    url: str = ""
    started_at: float  # wall clock (s) at the send
    stream: bool = False
    request_headers: dict[str, str] | None = None  # as sent, credentials redacted
    request: Any = None  # the body sent (sampled out: its digest, `body_sample.body_digest`)
    http_status: int | None
    server_request_id: str | None = None
    response: Any = None  # the answer (sampled out: its summary, `body_sample.answer_summary`)
    timings_ms: RecordTimings
    failure: RecordFailure | None
    problems: tuple[str, ...] = ()  # the answer broke the protocol: how
    resent: bool | UnsetType = UNSET  # a reused connection closed before answering
    body: str | UnsetType = UNSET  # SAMPLED_OUT: saved without its bodies
    response_raw: str | UnsetType = UNSET  # the bytes as received (streamed, or not JSON)

    @property
    def ok(self) -> bool:
        """A 2xx answer with no transport failure: `RequestRecord.ok` read back."""
        status = self.http_status
        return self.failure is None and status is not None and 200 <= status < 300

    @property
    def answered(self) -> bool:
        """`ok`, and the answer had no protocol problem."""
        return self.ok and not self.problems

    @property
    def e2e_s(self) -> float | None:
        """End-to-end seconds, from the intended send to the last byte (a bundle older than
        that figure: from the send)."""
        end = self.timings_ms.end_since_intended
        return None if end is None else end / 1000

    def attempt_s(self, e2e_s: float) -> float:
        """Seconds from this attempt's send to its end on the time axis: its end-to-end less
        the earlier attempts a retried request's figure includes (`retry_wait`)."""
        waited = self.timings_ms.retry_wait
        return e2e_s - (waited / 1000 if isinstance(waited, float) else 0.0)

    @property
    def failure_kind(self) -> str | None:
        """The failure's kind (`traffic.records.FailureKind`'s value); None: no failure."""
        return None if self.failure is None else self.failure.kind

    @property
    def sampled_out(self) -> bool:
        return self.body == SAMPLED_OUT


_ENCODER = msgspec.json.Encoder(enc_hook=str)  # as `store.jsonl_text`: anything else as text
_DECODER = msgspec.json.Decoder(RequestRecordLine)


def line_text(line: RequestRecordLine) -> str:
    """The line as a record stream holds it (one JSON object, newline-terminated)."""
    return _ENCODER.encode(line).decode() + "\n"


def decode_line(text: str | bytes, where: str) -> RequestRecordLine:
    """A record stream's line as the struct; `RecordLineError` naming `where` (the file and
    line) and the field otherwise."""
    try:
        return _DECODER.decode(text)
    except msgspec.ValidationError as exc:
        raise RecordLineError(where, str(exc), _is_object(text)) from exc
    except msgspec.DecodeError as exc:
        raise RecordLineError(where, str(exc), False) from exc
    except RecursionError as exc:  # nested past the parser's depth: not a record
        raise RecordLineError(where, "nested too deeply to read", False) from exc


def _is_object(text: str | bytes) -> bool:
    """Whether a line that is not of the struct is a JSON object all the same."""
    try:
        return isinstance(msgspec.json.decode(text), dict)
    except (msgspec.DecodeError, RecursionError):
        return False
