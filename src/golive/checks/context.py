"""What every check is given: the target seam, the bundle, the config and the profile."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from golive.bundle.request_line import line_text
from golive.bundle.store import Bundle
from golive.config import GoliveConfig
from golive.errors import BadResponse, ConfigError
from golive.metrics import Snapshot, parse_metrics
from golive.profiles import Profile
from golive.results import CheckResult, Status
from golive.traffic.body_sample import BodySample
from golive.traffic.records import (
    FailureKind,
    ParsedResponse,
    RequestRecord,
    error_message,
    error_param,
    parse,
)
from golive.traffic.workload import filler


class Target(Protocol):
    """The seam checks need from the traffic client (owned here, by the consumer)."""

    def url(self, path: str) -> str: ...

    def abort_in_flight(self, reason: str) -> int: ...

    async def get(self, path: str, label: str) -> RequestRecord: ...

    async def post(self, path: str, body: Mapping[str, Any], label: str) -> RequestRecord: ...

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord: ...


class NoTarget:
    """Stands in when no --target was given; a check that needs one says so, loudly."""

    def url(self, path: str) -> str:
        raise ConfigError(f"{path} needs a live server: give --target URL")

    def abort_in_flight(self, reason: str) -> int:
        return 0

    async def get(self, path: str, label: str) -> RequestRecord:
        raise ConfigError(f"{path} needs a live server: give --target URL")

    async def post(self, path: str, body: Mapping[str, Any], label: str) -> RequestRecord:
        raise ConfigError(f"{path} needs a live server: give --target URL")

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        raise ConfigError("chat requests need a live server: give --target URL")


@dataclass(frozen=True, slots=True)
class ServedModel:
    """The model golive's requests go to, as the server listed it."""

    model: str
    max_model_len: int | None
    evidence: str  # the saved /v1/models answer it was read from


@dataclass(slots=True)
class DeploymentFacts:
    """What a run learns of the deployment once and every family then uses: the served model
    (the first /v1/models answer that names one; a failed answer is asked again)."""

    served: ServedModel | None = None
    # behind a gateway: whether it passes vLLM's prompt fields on (`gateway.ASK_PROMPT`); a
    # strict gateway refuses fields it does not know, and golive then does not ask
    gateway_asks: bool = True


class PhaseProgress(Protocol):
    """What the CLI shows while a phase runs (a progress bar on a terminal, a plain line
    every 10 s elsewhere; nothing in tests). A phase states how long it should take, or how
    many requests it sends, where it knows."""

    def phase(
        self, name: str, total_s: float | None = None, requests: int | None = None
    ) -> None: ...

    def record(self, ok: bool) -> None: ...


class Quiet:
    def phase(self, name: str, total_s: float | None = None, requests: int | None = None) -> None:
        return None

    def record(self, ok: bool) -> None:
        return None


@dataclass(frozen=True, slots=True)
class CheckContext:
    target: Target
    bundle: Bundle
    config: GoliveConfig
    profile: Profile
    engine: Target | None = None  # gateway mode: the engine behind a gateway given as target
    facts: DeploymentFacts = dataclasses.field(default_factory=DeploymentFacts)
    # every record saved counts once on it (requests, errors)
    progress: PhaseProgress = dataclasses.field(default_factory=Quiet)

    @property
    def metrics_url(self) -> str:
        """`target.metrics_url`, else the engine's own `/metrics` (behind a gateway: the one
        at `target.engine_url`; a gateway seldom passes /metrics on, and one that does may
        rename what it passes), else the target's."""
        if self.config.target.metrics_url:
            return self.config.target.metrics_url
        return (self.engine or self.target).url("/metrics")

    def body_sample(self) -> BodySample:
        """Which high-volume records keep their full bodies (`records` in the config)."""
        return body_sample(self.config)

    def save(
        self, record: RequestRecord, stream_file: str, sample: BodySample | None = None
    ) -> ParsedResponse:
        """Parse a record and append it to `requests/<stream_file>.jsonl` in the bundle; with
        `sample`, only the records it keeps have their full bodies there."""
        parsed = parse(record)
        self.progress.record(record.ok)
        full = sample is None or sample.keep(stream_file, parsed)
        self.bundle.append_text(f"requests/{stream_file}.jsonl", line_text(parsed.saved_line(full)))
        return parsed


def body_sample(config: GoliveConfig) -> BodySample:
    """Which high-volume records keep their full bodies, as `records` in `config` says."""
    kept = config.records
    return BodySample.of_share(kept.full_body_first, kept.full_body_share)


def served_entry(body: object, wanted: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    """golive's one rule for the served model in a /v1/models answer: the configured model if
    it is listed, else (none configured) the first listed. Returns its entry (None: not
    served, or nothing listed) and every id listed."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None, []
    listed = [e for e in entries if isinstance(e, dict)]
    served = [str(e.get("id")) for e in listed]
    if not listed:
        return None, served
    model = wanted or served[0]
    return (listed[served.index(model)] if model in served else None), served


def served_of(parsed: ParsedResponse, wanted: str | None, evidence: str) -> ServedModel | None:
    """The served model in a saved /v1/models answer (`served_entry`), or None."""
    if not parsed.record.ok:
        return None
    entry, _ = served_entry(parsed.json_body, wanted)
    if entry is None:
        return None
    length = entry.get("max_model_len")
    return ServedModel(str(entry["id"]), length if isinstance(length, int) else None, evidence)


def unserved(parsed: ParsedResponse, wanted: str | None, what: str) -> str:
    """Why a saved /v1/models answer (`what`: how it was asked) names no served model, where
    `served_of` found none: no answer (the timeout or error that ended it), an HTTP error,
    no model listed, or not the one configured."""
    problem = transport_problem(parsed, what)
    if problem is not None:
        return problem[1]
    _, listed = served_entry(parsed.json_body, wanted)
    if not listed:
        return f"{what}: HTTP {parsed.record.status}, but no model listed"
    return f"{what}: lists {', '.join(listed)}, not target.model {wanted!r}"


async def served_model(ctx: CheckContext, stream_file: str) -> ServedModel | None:
    """The served model, asked of `/v1/models` once per run: the first family to need it
    saves the answer in `requests/<stream_file>.jsonl`, the others reuse what it said."""
    if ctx.facts.served is not None:
        return ctx.facts.served
    parsed = ctx.save(await ctx.target.get("/v1/models", "models"), stream_file)
    ctx.facts.served = served_of(parsed, ctx.config.target.model, f"requests/{stream_file}.jsonl")
    return ctx.facts.served


@dataclass(frozen=True, slots=True)
class Scrape:
    """A metrics scrape: the snapshot, or why there is none."""

    snapshot: Snapshot | None
    problem: str | None
    evidence: str | None


async def scrape(
    ctx: CheckContext,
    window: str | None,
    source: Target | None = None,
    url: str | None = None,
    only: tuple[str, ...] | None = None,
    label: str | None = None,
) -> Scrape:
    """Scrape `/metrics` (the target's, or `url` through `source`) and parse it: the one
    scrape-and-parse of golive. `window`: save the raw text as `metrics/<window>.prom` (None:
    a sample that is not kept, e.g. the samplers' gauges); `only`: parse just these families."""
    source = source or ctx.target
    url = url or ctx.metrics_url
    record = await source.get(url, label or f"metrics-{window}")
    if record.failure is not None and record.status is None:
        return Scrape(None, f"{url} unreachable: {record.failure.message}", None)
    text = record.raw_text
    evidence = None if window is None else f"metrics/{window}.prom"
    if evidence is not None:
        ctx.bundle.write_text(evidence, text)
    if not record.ok:
        return Scrape(None, f"{url} answered HTTP {record.status}", evidence)
    try:
        snapshot = parse_metrics(text, taken_at=record.started_at, only=only)
    except BadResponse as exc:
        return Scrape(None, f"{url}: {exc}", evidence)
    if not snapshot.has_vllm_metrics():
        return Scrape(None, f"{url} has no vllm: metric families", evidence)
    return Scrape(snapshot, None, evidence)


def transport_problem(parsed: ParsedResponse, what: str) -> tuple[Status, str] | None:
    """Status and sentence for a response that failed below the protocol, else None."""
    record = parsed.record
    failure = record.failure
    if record.status is None:
        return Status.ERROR, f"{what}: no answer ({failure.message if failure else 'unknown'})"
    if failure is not None and failure.kind is not FailureKind.HTTP_STATUS:
        return Status.FAIL, f"{what}: HTTP {record.status}, then {failure.message}"
    if not record.ok:
        detail = error_message(parsed.json_body) or record.raw_text[:200] or "empty body"
        if record.refused:
            param = error_param(parsed.json_body)
            field = f", field {param!r}" if param else ""
            return Status.FAIL, (
                f"{what}: the server refused it as configured (HTTP {record.status}{field}): "
                f"{detail} — a configuration finding: enable it on the server or adapt the "
                "request"
            )
        return Status.FAIL, f"{what}: HTTP {record.status}: {detail}"
    return None


async def chat_tokens(ctx: CheckContext, model: str, messages: list[dict[str, Any]]) -> int | None:
    """The prompt tokens of `messages` with the chat template, by the server's own
    `/tokenize` (None where the server has none or refuses)."""
    record = await ctx.target.post(
        "/tokenize", {"model": model, "messages": messages}, "tokenize-chat"
    )
    body = parse(record).json_body
    if record.ok and isinstance(body, dict) and isinstance(body.get("count"), int):
        return int(body["count"])
    return None


async def tokens_per_word(ctx: CheckContext, model: str) -> tuple[float, str]:
    """Calibrate golive's filler text with the server's own tokenizer (`/tokenize`)."""
    words = 400
    record = await ctx.target.post(
        "/tokenize", {"model": model, "prompt": filler(words, 7)}, "tokenize"
    )
    body = parse(record).json_body
    if record.ok and isinstance(body, dict) and isinstance(body.get("count"), int):
        return body["count"] / (words + 1), "measured with /tokenize"
    return 1.4, "assumed (no /tokenize)"


def compressed(ctx: CheckContext, stream: str) -> str:
    """With `records.compress`, a finished record stream zstd-compressed; the path that now
    holds it."""
    return ctx.bundle.compress(stream) if ctx.config.records.compress else stream


def packed(ctx: CheckContext, result: CheckResult, stream: str) -> CheckResult:
    """`compressed`, and the result's evidence naming the file that now holds the stream."""
    now = compressed(ctx, stream)
    if now == stream:
        return result
    evidence = tuple(now if e == stream else e for e in result.evidence)
    return dataclasses.replace(result, evidence=evidence)
