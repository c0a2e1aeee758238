"""What building one capacity request body costs golive: `AgentWorkload.body` at capacity's
default shape, alone and with its JSON encoding as the client sends it (issue 33).

    python bench/bodies.py [--bodies 3000] [--runs 3]

Prints one JSON line per run: µs per body, and per body with its encoding. Run it with
another golive's `src` on PYTHONPATH to compare versions on the same machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import golive
from golive.capacity_config import CapacityConfig
from golive.checks.capacity.load_window import capacity_shape
from golive.traffic.client import _BODY_JSON
from golive.traffic.workload import AgentWorkload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    shape = capacity_shape(CapacityConfig(), seed=123_456)
    src = Path(golive.__file__).resolve().parents[1]
    rev = subprocess.run(
        ["git", "-C", str(src), "log", "-1", "--format=%h"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    for _ in range(args.runs):
        workload = AgentWorkload(shape, "bench-model")
        start = time.perf_counter()
        for n in range(args.bodies):
            workload.body(n)
        built = time.perf_counter()
        for n in range(args.bodies):
            _BODY_JSON.encode(workload.body(n)).encode()
        encoded = time.perf_counter()
        print(
            json.dumps(
                {
                    "golive": str(src),
                    "rev": rev,
                    "body_us": round((built - start) / args.bodies * 1e6, 1),
                    "body_and_json_us": round((encoded - built) / args.bodies * 1e6, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
