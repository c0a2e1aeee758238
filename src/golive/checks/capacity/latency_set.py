"""The standard latency set of a load window, read from its saved request records (issue 31
§2): TTFT, ITL, TPOT and end-to-end at p50/p90/p95/p99 with their sample counts, output
tokens/s, requests/s and goodput against the stated SLOs. Names follow `vllm bench serve
--save-result` (`p95_ttft_ms`, `request_throughput`, `request_goodput`, ...), which GuideLLM
and AIPerf users read as well (docs/judgement.md maps them). The collector writes them to
`metrics/latency.json` and `.csv`; the SLO check judges from the same figures, recomputed by
`golive decide` from the records. Pure: record lines in, figures out.

- TTFT and end-to-end are measured from the request's intended send time (a request the
  client sent late waited too), as the ramp's own figures are.
- ITL: the gaps between the streamed chunks (each network read) from the first token on,
  pooled over the window (as `vllm bench serve`), at most output tokens - 1 of them an answer
  (its usage chunk and `[DONE]` are not tokens); a stamp saved twice is one read.
- TPOT: each answer's (end - first token) / (output tokens - 1); its inverse is the answer's
  decode speed, the "output tokens per second per user".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.bundle.request_line import RequestRecordLine
from golive.checks.capacity.recorded import answers_of
from golive.quantiles import Quantile, percentile, quantile
from golive.slo_config import SloConfig

PERCENTILES = (50, 90, 95, 99)
ONE_READ_MS = 5.0  # an answer's end this close to its first token came in the same read
METRICS = ("ttft", "itl", "tpot", "e2el")


@dataclass(frozen=True, slots=True)
class Answer:
    """One answered request's figures (None where its record cannot say)."""

    ttft_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    gaps_ms: tuple[float, ...]
    input_tokens: int | None
    output_tokens: int | None
    one_read: bool = False  # every token after the first came with it, in one network read

    @property
    def tokens_per_s(self) -> float | None:
        """The answer's decode speed after its first token (1 / TPOT)."""
        return None if not self.tpot_ms else 1000 / self.tpot_ms

    def lacks(self, metric: str) -> bool:
        """Whether the answer should have this figure and its record does not say it: a
        streamed answer of more than one token has a TPOT and gaps between its tokens."""
        if metric == "ttft":
            return self.ttft_ms is None
        if metric == "e2el":
            return self.e2e_ms is None
        if self.output_tokens is None:
            return True
        if metric == "tpot":
            return self.output_tokens > 1 and self.tpot_ms is None
        return self.output_tokens > 1 and not self.gaps_ms and not self.one_read  # itl


def _number(value: float | None) -> float | None:
    """A saved time as a figure: absent, not finite or negative is None (no figure, never a
    fast one)."""
    if value is None:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _tokens(record: RequestRecordLine, key: str) -> int | None:
    response = record.response
    usage = response.get("usage") if isinstance(response, Mapping) else None
    value = usage.get(key) if isinstance(usage, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def answer_of(record: RequestRecordLine) -> Answer:
    """An answered record's figures, from its saved timings and usage."""
    timings = record.timings_ms
    first, end = _number(timings.first_token), _number(timings.end)
    output = _tokens(record, "completion_tokens")
    tpot = None
    if first is not None and end is not None and output is not None and output > 1:
        tpot = (end - first) / (output - 1)
    stamps = sorted(t for c in timings.chunks if (t := _number(c)) is not None)
    gaps: tuple[float, ...] = ()
    fits = True  # its reads after the first token can carry its tokens
    if first is not None and output is not None and output > 1:
        after = sorted({t for t in stamps if t >= first})  # a stamp twice is one read
        found = tuple(b - a for a, b in itertools.pairwise(after))
        # a read a token, the usage chunk and [DONE] after them, and an event split over two
        # reads now and then (a tenth, two at least): more reads than that are not this
        # answer's (stamps added to dilute its gaps)
        fits = len(found) <= output + 1 + max(2, output // 10)
        gaps = found[: output - 1] if fits else ()
    e2e = record.e2e_s
    # a short answer can arrive whole in the read that brought its first token: no gap to
    # time, its end there too (a record whose reads were taken out still ends later)
    one_read = (
        fits and first is not None and end is not None and not gaps and end - first <= ONE_READ_MS
    )
    return Answer(
        ttft_ms=_number(timings.first_token_since_intended),
        e2e_ms=None if e2e is None else e2e * 1000,
        tpot_ms=tpot,
        gaps_ms=gaps,
        input_tokens=_tokens(record, "prompt_tokens"),
        output_tokens=output,
        one_read=one_read,
    )


def good(answer: Answer, slo: SloConfig) -> bool:
    """Whether one answer met every per-request objective (goodput, as `vllm bench serve
    --goodput` counts it: TTFT, TPOT against the ITL target, end-to-end, decode speed)."""
    limits = (
        (answer.ttft_ms, slo.ttft_p95_ms),
        (answer.tpot_ms, slo.itl_p95_ms),
        (answer.e2e_ms, slo.e2e_p95_ms),
    )
    if any(limit is not None and (value is None or value > limit) for value, limit in limits):
        return False
    floor = slo.min_output_tokens_per_s_per_user
    speed = answer.tokens_per_s
    return floor is None or (speed is not None and speed >= floor)


@dataclass(frozen=True, slots=True)
class WindowLatency:
    """A window's standard latency set."""

    label: str
    concurrency: int | None
    requests: int  # the answers its figures count (`recorded.answers_of`), failures included
    completed: int
    duration_s: float  # first send to last end, from the records
    answers: tuple[Answer, ...]
    goodput: int | None  # answers meeting every SLO (None: none stated)

    def lacking(self, metric: str) -> int:
        """Answers whose records do not say this figure (their sample cannot speak for them)."""
        return sum(1 for a in self.answers if a.lacks(metric))

    def values(self, metric: str) -> list[float]:
        if metric == "itl":
            return [g for a in self.answers for g in a.gaps_ms]
        field = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}[metric]
        return [v for a in self.answers if (v := getattr(a, field)) is not None]

    def quantile(self, metric: str, q: float) -> Quantile:
        return quantile(self.values(metric), q)

    @property
    def error_rate(self) -> float | None:
        return None if not self.requests else (self.requests - self.completed) / self.requests

    def per_s(self, count: float) -> float | None:
        return round(count / self.duration_s, 4) if self.duration_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        """One row of `metrics/latency.json` / `.csv`, named as `vllm bench serve` names them."""
        row: dict[str, Any] = {
            "label": self.label,
            "concurrency": self.concurrency,
            "duration": round(self.duration_s, 3),
            "requests": self.requests,
            "completed": self.completed,
            "failed": self.requests - self.completed,
        }
        output = sum(a.output_tokens or 0 for a in self.answers)
        row["total_input_tokens"] = sum(a.input_tokens or 0 for a in self.answers)
        row["total_output_tokens"] = output
        row["request_throughput"] = self.per_s(self.completed)
        row["output_throughput"] = self.per_s(output)
        row["request_goodput"] = None if self.goodput is None else self.per_s(self.goodput)
        for metric in METRICS:
            values = self.values(metric)
            row[f"{metric}_samples"] = len(values)
            row[f"mean_{metric}_ms"] = round(sum(values) / len(values), 3) if values else None
            for q in PERCENTILES:
                name = "median" if q == 50 else f"p{q}"
                value = percentile(values, q)
                row[f"{name}_{metric}_ms"] = None if value is None else round(value, 3)
        for key, field in (("input_len", "input_tokens"), ("output_len", "output_tokens")):
            lengths = [float(v) for a in self.answers if (v := getattr(a, field)) is not None]
            for q in (50, 90, 99):
                value = percentile(lengths, q)
                row[f"p{q}_{key}"] = None if value is None else round(value, 1)
        return row


def window_latency(
    label: str,
    concurrency: int | None,
    attempts: Sequence[RequestRecordLine],
    slo: SloConfig | None = None,
) -> WindowLatency:
    """The latency set of one window's attempts (its records, `recorded.window_records`)."""
    counted = answers_of(attempts)
    answered = [r for r in counted if r.answered]
    answers = tuple(answer_of(r) for r in answered)
    return WindowLatency(
        label=label,
        concurrency=concurrency,
        requests=len(counted),
        completed=len(answered),
        duration_s=_span(counted),
        answers=answers,
        goodput=None if slo is None or not slo.stated else sum(1 for a in answers if good(a, slo)),
    )


def _span(records: Iterable[RequestRecordLine]) -> float:
    """Seconds from the window's first send to its last answer's end, from the records."""
    starts, ends = [], []
    for record in records:
        started = _number(record.started_at)
        e2e = record.e2e_s
        if started is None:
            continue
        starts.append(started)
        ends.append(started + (record.attempt_s(e2e) if e2e is not None else 0.0))
    return max(ends) - min(starts) if starts else 0.0


def pooled(windows: Sequence[WindowLatency], label: str) -> WindowLatency:
    """Windows at one load (a ramp step, its knee repeats, the sustained window there) as one
    sample: their answers together, their lengths summed."""
    goodput = [w.goodput for w in windows]
    return WindowLatency(
        label=label,
        concurrency=windows[0].concurrency if windows else None,
        requests=sum(w.requests for w in windows),
        completed=sum(w.completed for w in windows),
        duration_s=sum(w.duration_s for w in windows),
        answers=tuple(a for w in windows for a in w.answers),
        goodput=None if any(g is None for g in goodput) else sum(g or 0 for g in goodput),
    )
