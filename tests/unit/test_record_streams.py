"""Issue 17 §7: request records at GPU speed. Every request keeps its timings, status, ids and
usage; full bodies only for a sample, every failure and every non-capacity request; finished
capacity streams are zstd-compressed, readable by golive and by standard zstd tools."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard

from golive.bundle.layout import AGENT_FAILURES, LEDGER_SENT
from golive.bundle.request_line import line_text
from golive.bundle.store import Bundle, BundleReader, read_lines, record_streams, size_bytes
from golive.checks.ledger import judge_ledger, ledger_check, write_ledger
from golive.results import Status
from golive.traffic.body_sample import BodySample, body_digest
from golive.traffic.records import (
    Failure,
    FailureKind,
    ParsedResponse,
    RequestRecord,
    Timings,
    parse,
)
from golive.traffic.workload import AgentWorkload, WorkloadShape

URL = "http://127.0.0.1:8000/v1/chat/completions"
WORKLOAD = AgentWorkload(WorkloadShape(), "m")


def _streamed(n: int, tokens: int = 24, status: int = 200) -> ParsedResponse:
    """A capacity request as the GPU run sent it: the agent workload's body, answered by an
    SSE stream of one chunk per token plus usage."""
    events: list[dict[str, Any]] = [
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}],
        }
        for i in range(tokens)
    ]
    events.append(
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 900, "completion_tokens": tokens, "total_tokens": 924},
        }
    )
    chunks = (*tuple(f"data: {json.dumps(e)}\n\n".encode() for e in events), b"data: [DONE]\n\n")
    sent = 1_000_000 * n
    stamps = tuple(sent + 30 + 7 * i for i in range(len(chunks)))
    timings = Timings(sent, sent, sent + 10, sent + 20, sent + 900, stamps)
    failure = None if status == 200 else Failure(FailureKind.HTTP_STATUS, f"HTTP {status}")
    record = RequestRecord(
        f"golive-{n}",
        f"capacity-c64-{n}",
        "POST",
        URL,
        WORKLOAD.body(n),
        True,
        1_700_000_000.0 + n,
        timings,
        status,
        {"content-type": "text/event-stream", "x-request-id": f"req-{n}"},
        chunks if status == 200 else (b'{"error": {"message": "overloaded"}}',),
        failure,
    )
    return parse(record)


def test_a_sampled_out_record_keeps_timings_status_ids_and_usage_but_no_text() -> None:
    """A sampled-out record keeps timings, status, ids and usage, but no answer text."""
    parsed = _streamed(7)
    full = json.loads(line_text(parsed.saved_line()))
    slim = json.loads(line_text(parsed.saved_line(full=False)))
    for key in (
        "request_id",
        "label",
        "http_status",
        "server_request_id",
        "timings_ms",
        "started_at",
    ):
        assert slim[key] == full[key]
    assert slim["response"]["usage"] == {
        "prompt_tokens": 900,
        "completion_tokens": 24,
        "total_tokens": 924,
    }
    assert slim["response"]["finish_reasons"] == ["length"]
    assert slim["body"] == "sampled-out"
    assert slim["request"]["messages"] == len(WORKLOAD.body(7)["messages"])
    assert len(slim["request"]["sha256"]) == 64
    text = json.dumps(slim)
    assert "word3" not in text
    assert "operations agent" not in text
    assert "response_raw" not in slim
    assert len(text) * 4 < len(json.dumps(full))


def test_a_sampled_out_body_is_the_digest_of_its_sorted_json() -> None:
    """A sampled-out body's digest is the sha256 and size of the body's JSON with sorted
    keys and text as written (not escaped), so a user can match it against the body sent."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "héllo \u2028 \n\t"}],
        "temperature": 0.7,
        "max_tokens": 64,
        "stream": True,
        "extra": {"b": [1, 2.5e-7, None], "a": "ü"},
    }
    raw = json.dumps(body, sort_keys=True, ensure_ascii=False).encode()
    digest = body_digest(body)
    assert digest is not None
    assert digest["sha256"] == hashlib.sha256(raw).hexdigest()
    assert digest["bytes"] == len(raw)
    assert digest["messages"] == 1


def test_the_sample_keeps_every_failure_the_first_records_and_one_in_n() -> None:
    """The body sample keeps the first records, every failure and one in N of the rest."""
    sample = BodySample.of_share(first=3, share=0.25)
    kept = [sample.keep("capacity-sustained", _streamed(n)) for n in range(15)]
    assert kept == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
    ]
    assert sample.keep("capacity-sustained", _streamed(99, status=503)) is True
    assert sample.keep("capacity-concurrency", _streamed(1)) is True  # a stream of its own
    assert not any(BodySample.of_share(0, 0.0).keep("s", _streamed(n)) for n in range(5))
    assert all(BodySample.of_share(0, 1.0).keep("s", _streamed(n)) for n in range(5))


def _write_phase(bundle: Bundle, stream: str, count: int, sample: BodySample | None) -> None:
    for n in range(count):
        parsed = _streamed(n)
        full = sample is None or sample.keep(stream, parsed)
        bundle.append_text(f"requests/{stream}.jsonl", line_text(parsed.saved_line(full)))


def test_a_compressed_stream_is_read_by_golive_and_by_zstd(tmp_path: Path) -> None:
    """A compressed record stream, appended in two frames, reads back whole with golive and with
    zstd."""
    bundle = Bundle.create(tmp_path / "b")
    _write_phase(bundle, "capacity-sustained", 40, None)
    plain = (tmp_path / "b/requests/capacity-sustained.jsonl").read_text()
    assert (
        bundle.compress("requests/capacity-sustained.jsonl")
        == "requests/capacity-sustained.jsonl.zst"
    )
    _write_phase(bundle, "capacity-sustained", 5, None)  # the phase's stream reopened later
    assert (
        bundle.compress("requests/capacity-sustained.jsonl")
        == "requests/capacity-sustained.jsonl.zst"
    )
    packed = tmp_path / "b/requests/capacity-sustained.jsonl.zst"
    assert not (tmp_path / "b/requests/capacity-sustained.jsonl").exists()
    lines = list(read_lines(packed))
    assert len(lines) == 45
    assert "".join(lines[:40]) == plain
    # standard zstd frames: any decoder reads every frame
    reader = zstandard.ZstdDecompressor().stream_reader(
        packed.read_bytes(), read_across_frames=True
    )
    assert reader.read().decode().count("\n") == 45
    if shutil.which("zstd"):
        out = subprocess.run(["zstd", "-dc", str(packed)], capture_output=True, check=True)
        assert out.stdout.decode().count("\n") == 45
    assert record_streams(tmp_path / "b") == [packed]
    assert ledger_check(tmp_path / "b", sent=45).status is Status.PASS
    assert ledger_check(tmp_path / "b", sent=46).status is Status.ERROR


def test_a_damaged_compressed_stream_is_named_by_the_ledger(tmp_path: Path) -> None:
    """A damaged compressed stream is an error of the ledger naming the file."""
    bundle = Bundle.create(tmp_path / "b")
    _write_phase(bundle, "capacity-concurrency", 10, None)
    bundle.compress("requests/capacity-concurrency.jsonl")
    packed = tmp_path / "b/requests/capacity-concurrency.jsonl.zst"
    packed.write_bytes(packed.read_bytes()[:-40] + b"\x00" * 40)
    result = ledger_check(tmp_path / "b", sent=10)
    assert result.status is Status.ERROR
    assert "capacity-concurrency.jsonl.zst" in result.summary


@pytest.mark.parametrize("requests", [10_556])
def test_the_gpu_runs_load_fits_in_a_small_bundle(tmp_path: Path, requests: int) -> None:
    """The calibrated H200 run sent 10,556 capacity requests and its bundle was 160 MB; with
    the default sample and compression the records of that many requests stay under 2 MB
    (the bundle's goal is 20 MB with everything else), while keeping full bodies and a
    plain stream would not."""
    records = Bundle.create(tmp_path / "slim")
    sample = BodySample.of_share(first=20, share=0.02)
    _write_phase(records, "capacity-sustained", requests, sample)
    records.compress("requests/capacity-sustained.jsonl")
    records.close()
    slim = size_bytes(tmp_path / "slim")
    whole = Bundle.create(tmp_path / "whole")
    _write_phase(whole, "capacity-sustained", 500, None)
    whole.close()
    per_request_whole = size_bytes(tmp_path / "whole") / 500
    print(
        f"{requests} requests: {slim} bytes sampled+zstd, {per_request_whole:.0f} bytes/request whole"
    )
    assert slim < 10_000_000, slim
    assert per_request_whole * requests > 5 * slim
    assert ledger_check(tmp_path / "slim", sent=requests).status is Status.PASS


def test_the_ledger_is_judged_again_from_the_saved_count(tmp_path: Path) -> None:
    """`golive decide` balances the saved count of requests sent against the record lines:
    a record removed from the bundle afterwards is missing evidence, even with the manifest
    recomputed; a bundle without the count cannot be balanced (no_data, never a pass)."""
    bundle = Bundle.create(tmp_path / "b")
    _write_phase(bundle, "capacity-concurrency", 12, None)
    assert write_ledger(bundle, 12).status is Status.PASS
    assert json.loads((tmp_path / "b" / LEDGER_SENT).read_text()) == {"sent": 12}
    bundle.close()
    stream = tmp_path / "b/requests/capacity-concurrency.jsonl"
    stream.write_text("".join(stream.read_text().splitlines(keepends=True)[1:]))
    again = judge_ledger(BundleReader(tmp_path / "b"))
    assert again.status is Status.ERROR
    assert again.measurements == {"sent": 12, "recorded": 11}
    (tmp_path / "b" / LEDGER_SENT).unlink()
    assert judge_ledger(BundleReader(tmp_path / "b")).status is Status.NO_DATA


def test_a_record_moved_among_the_failure_examples_is_missing_to_the_ledger(
    tmp_path: Path,
) -> None:
    """requests/agent-failures.jsonl holds examples of failures, not records, and the judges
    that scan the streams skip it: a record moved there out of its stream is counted missing
    by the ledger too, never balanced while no judge sees it."""
    bundle = Bundle.create(tmp_path / "b")
    _write_phase(bundle, "capacity-concurrency", 12, None)
    assert write_ledger(bundle, 12).status is Status.PASS
    bundle.close()
    stream = tmp_path / "b/requests/capacity-concurrency.jsonl"
    first, *rest = stream.read_text().splitlines(keepends=True)
    stream.write_text("".join(rest))
    (tmp_path / "b" / AGENT_FAILURES).write_text(first)
    again = judge_ledger(BundleReader(tmp_path / "b"))
    assert again.status is Status.ERROR
    assert again.measurements == {"sent": 12, "recorded": 11}
