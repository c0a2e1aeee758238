"""`--workers`' hand-off, one step at a time: what a worker spends on a record beyond what
one golive loop spends on it, and what the main process spends receiving it.

    python bench/handoff.py [--records 4000] [--out handoff.json]

Real answers first: `--records` 64-token streams from nginx through golive's own client
(`TargetClient`), as a capacity window gets them. Then each step of a record's path is timed
over all of them, best of `--repeats` passes, in µs a record:

- both paths: `parse` (frame, decode, fold) and `render` (the bundle line);
- the worker only: `for_main` (the answer without its raw bytes; `for_main_replace` as it
  was built before, with `dataclasses.replace`), `dumps` (pickling a
  batch of `FLUSH_RECORDS` as `Connection.send` does) and `pipe` (the batch through a real
  pipe to a reader process, send side);
- the main process: `loads` (unpickling a batch) and `receive` (the sink's own work in a
  capacity run: a dict entry and the progress and tally counts, here a dict and a count);
- `wire_*`: the same steps as the batch travels now (`to_main`: MessagePack bytes inside
  the pickled message; `from_worker` reads them), beside the pickled batch it replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import multiprocessing
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from golive.bundle.request_line import line_text
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.process_load import FLUSH_RECORDS
from golive.traffic.records import ParsedResponse, RequestRecord, parse
from golive.traffic.worker_wire import for_main, from_worker, to_main
from net import free_port
from nginx import Nginx
from scaling import cpu_model
from sse import write_bodies


async def answers(url: str, count: int, concurrency: int = 64) -> list[RequestRecord]:
    body = {
        "model": "bench-model",
        "messages": [{"role": "user", "content": "hello " * 48}],
        "stream": True,
        "max_tokens": 64,
    }
    records: list[RequestRecord] = []
    async with TargetClient(ClientSettings(url, max_connections=concurrency)) as client:

        async def lane() -> None:
            while len(records) < count:
                records.append(await client.chat(body, "handoff", time.perf_counter_ns()))

        await asyncio.gather(*(lane() for _ in range(concurrency)))
    return records[:count]


def replaced(parsed: ParsedResponse) -> ParsedResponse:
    """`for_main` as it was before 2026-12-06 (two `dataclasses.replace`), for the table."""
    if not parsed.record.ok:
        return parsed
    slim = dataclasses.replace(parsed.record, body=None, chunks=(), headers=None, sent_headers=None)
    return dataclasses.replace(parsed, record=slim)


def per_record_us(work: Callable[[], object], records: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        work()
        best = min(best, time.perf_counter_ns() - start)
    return best / 1e3 / records


def batches(items: Sequence[Any]) -> list[list[Any]]:
    return [list(items[i : i + FLUSH_RECORDS]) for i in range(0, len(items), FLUSH_RECORDS)]


def drain(conn: Connection) -> None:
    while conn.recv_bytes():
        pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/handoff.py")
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="golive-handoff-"))
    write_bodies(work / "www", {"o64.sse": 64})
    cpus = sorted(os.sched_getaffinity(0))
    nginx = Nginx(work, free_port(), cpus[-1])
    nginx.start()
    try:
        records = asyncio.run(answers(f"http://127.0.0.1:{nginx.port}/o64", args.records))
    finally:
        nginx.stop()
    n, repeats = len(records), args.repeats
    parsed: list[ParsedResponse] = [parse(r) for r in records]
    slim = [for_main(p) for p in parsed]
    lines = [line_text(p.saved_line(False)) for p in parsed]
    handed = batches(list(zip(slim, lines, strict=True)))
    dumped = [bytes(ForkingPickler.dumps(b)) for b in handed]
    wired = [bytes(ForkingPickler.dumps(to_main(b))) for b in handed]
    costs = {
        "parse": per_record_us(lambda: [parse(r) for r in records], n, repeats),
        "render": per_record_us(
            lambda: [line_text(p.saved_line(False)) for p in parsed], n, repeats
        ),
        "for_main": per_record_us(lambda: [for_main(p) for p in parsed], n, repeats),
        "for_main_replace": per_record_us(lambda: [replaced(p) for p in parsed], n, repeats),
        "dumps": per_record_us(lambda: [ForkingPickler.dumps(b) for b in handed], n, repeats),
        "loads": per_record_us(lambda: [pickle.loads(d) for d in dumped], n, repeats),
        "wire_dumps": per_record_us(
            lambda: [ForkingPickler.dumps(to_main(b)) for b in handed], n, repeats
        ),
        "wire_loads": per_record_us(
            lambda: [from_worker(pickle.loads(d)) for d in wired], n, repeats
        ),
    }
    reader, writer = multiprocessing.get_context("spawn").Pipe(duplex=False)
    child = multiprocessing.get_context("spawn").Process(target=drain, args=(reader,))
    child.start()
    for d in dumped:  # untimed: the reader is up and reading before the timing
        writer.send_bytes(d)
    costs["pipe"] = per_record_us(lambda: [writer.send_bytes(d) for d in dumped], n, repeats)
    costs["wire_pipe"] = per_record_us(lambda: [writer.send_bytes(d) for d in wired], n, repeats)
    writer.send_bytes(b"")
    child.join()
    seen: dict[str, ParsedResponse] = {}

    def receive() -> None:
        ok = 0
        for batch in handed:
            "".join(line for _, line in batch)
            for p, _ in batch:
                seen[p.record.request_id] = p
                ok += p.record.ok

    costs["receive"] = per_record_us(receive, n, repeats)
    sizes = {
        "record_pickled_bytes": sum(len(d) for d in dumped) / n,
        "record_wire_bytes": sum(len(d) for d in wired) / n,
        "full_answer_pickled_bytes": sum(len(pickle.dumps(p)) for p in parsed[:500]) / 500,
        "line_bytes": sum(len(line) for line in lines) / n,
    }
    worker = costs["for_main_replace"] + costs["dumps"] + costs["pipe"]
    wire = costs["for_main"] + costs["wire_dumps"] + costs["wire_pipe"]
    out = {
        "machine": f"{cpu_model()}, {len(cpus)} CPUs, Python {sys.version.split()[0]}",
        "recorded": time.strftime("%Y-%m-%d"),
        "records": n,
        "us_per_record": {k: round(v, 2) for k, v in costs.items()},
        "pickled_worker_us": round(worker, 2),
        "pickled_main_us": round(costs["loads"] + costs["receive"], 2),
        "wire_worker_us": round(wire, 2),
        "wire_main_us": round(costs["wire_loads"] + costs["receive"], 2),
        **{k: round(v) for k, v in sizes.items()},
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
