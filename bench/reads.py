"""What one socket read costs on this host, alone and as a batch in one turn of an asyncio loop.

    python bench/reads.py [--sockets 128] [--rounds 300]

An engine that ends a step for N streams hands golive N ready sockets at once; the loop reads
them all in one turn. This measures (1) a 200-byte send + recv pair on a socketpair, in a
plain loop (the kernel's cost: under gVisor a system call costs several times a native one),
and (2) an asyncio loop (the one golive runs) woken with N sockets ready at once: the time
from the sends to the last `data_received`, per round. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import time

PAYLOAD = b"data: " + b"x" * 190 + b"\n\n"


def pair_cost_us(rounds: int) -> float:
    a, b = socket.socketpair()
    try:
        start = time.perf_counter_ns()
        for _ in range(rounds):
            a.send(PAYLOAD)
            b.recv(65536)
        return (time.perf_counter_ns() - start) / rounds / 1e3
    finally:
        a.close()
        b.close()


class _Reader(asyncio.Protocol):
    def __init__(self, batch: list[int]) -> None:
        self.batch = batch

    def data_received(self, data: bytes) -> None:
        self.batch[0] -= 1
        if self.batch[0] == 0:
            self.batch[1] = time.perf_counter_ns()


async def batch_turns(sockets: int, rounds: int) -> list[float]:
    loop = asyncio.get_running_loop()
    batch = [0, 0]
    senders = []
    for _ in range(sockets):
        a, b = socket.socketpair()
        senders.append(a)
        await loop.create_connection(lambda: _Reader(batch), sock=b)
    spans = []
    for _ in range(rounds):
        batch[0], batch[1] = sockets, 0
        for a in senders:
            a.send(PAYLOAD)
        sent = time.perf_counter_ns()
        while batch[1] == 0:
            await asyncio.sleep(0)
        spans.append((batch[1] - sent) / 1e6)
    for a in senders:
        a.close()
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    pair = [pair_cost_us(20_000) for _ in range(3)]
    spans = sorted(asyncio.run(batch_turns(args.sockets, args.rounds)))
    print(
        json.dumps(
            {
                "send_recv_pair_us": round(statistics.median(pair), 2),
                "sockets": args.sockets,
                "batch_read_ms_p50": round(spans[len(spans) // 2], 3),
                "batch_read_ms_p99": round(spans[int(0.99 * len(spans))], 3),
                "per_read_us_p50": round(spans[len(spans) // 2] * 1e3 / args.sockets, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
