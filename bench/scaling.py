"""`--workers` scaling: golive's end-to-end max_rps with the engine in N processes, as a
ratio to one core (`max_rps`, the engine in golive's own loop). Needs a machine with cores
to spare: golive gets cores 0..N (N workers and the main process), nginx (several worker
processes) the top cores, so the server is never the limit being measured.

    python bench/scaling.py --workers 1,2,4 --runs 3 --out bench/scaling.json

Each figure is the median of `--runs` windows of `--duration` s; every answer is parsed,
checked and written to a bundle as a capacity window does (drive.py max_rps_workers).

`--independent` adds a control: N separate one-core golive processes (`drive.py max_rps`,
each its own bundle, no hand-off to a main process) at once, each on a core of its own. Their
summed rate over N times one core's is what the host gives N busy processes at all: where it
is as low as `--workers N`'s ratio, the host, not golive's hand-off, sets the limit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from net import free_port
from nginx import Nginx
from sse import write_bodies

HERE = Path(__file__).resolve().parent


def _start(cpus: str, *args: str) -> subprocess.Popen[str]:
    argv = ["taskset", "-c", cpus, sys.executable, str(HERE / "drive.py"), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str], *args: str) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:  # as subprocess.run does: the child does not outlive it
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"drive.py {' '.join(args)} exited {proc.returncode}: {err[-800:]}")
    result: dict[str, Any] = json.loads(out)
    return result


def drive(cpus: str, *args: str) -> dict[str, Any]:
    return _result(_start(cpus, *args), *args)


def independent(cores: list[int], *args: str) -> dict[str, Any]:
    """One `drive.py max_rps` per core, all at once; their rates summed."""
    procs = [_start(str(cpu), *args) for cpu in cores]
    each = [_result(proc, *args)["rps"] for proc in procs]
    return {"rps": sum(each), "each_rps": each}


def physical_first(cores: list[int]) -> list[int]:
    """The cores in an order that gives each process a physical core of its own first: the
    first thread of every core, then the second threads (hyperthreads share a core's units)."""
    seen: dict[tuple[str, str], int] = {}
    ranked = []
    for cpu in cores:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            key = (
                (topology / "physical_package_id").read_text(),
                (topology / "core_id").read_text(),
            )
        except OSError:
            return cores
        ranked.append((seen.get(key, 0), cpu))
        seen[key] = seen.get(key, 0) + 1
    return [cpu for _, cpu in sorted(ranked)]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def scaling_rows(runs: dict[str, list[dict[str, Any]]], counts: list[int]) -> list[dict[str, Any]]:
    """Each engine's median rate over the rounds, the worst round beside it, and the ratios to
    one core's median (the aim is at least 0.85 x N); the separate processes' control where it
    ran."""

    def unit(measure: str, value: float) -> dict[str, Any]:
        return {
            "measure": measure,
            "value": value,
            "unit": "x" if "ratio" in measure else "requests/s",
        }

    one = [r["rps"] for r in runs["one_core"]]
    base = statistics.median(one)
    rows = [unit("max_rps", base), unit("max_rps_worst_run", min(one))]
    for n in counts:
        for kind in ("workers", "independent"):
            rates = [r["rps"] for r in runs.get(f"{kind}_{n}", [])]
            if not rates:
                continue
            rps = statistics.median(rates)
            rows += [
                unit(f"max_rps_{kind}_{n}", rps),
                unit(f"max_rps_{kind}_{n}_worst_run", min(rates)),
                unit(f"scaling_ratio_{kind}_{n}", rps / base),
                unit(f"scaling_ratio_{kind}_{n}_worst_run", min(rates) / base),
            ]
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/scaling.py")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64, help="per worker")
    parser.add_argument("--server-workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=HERE / "scaling.json")
    parser.add_argument(
        "--independent", action="store_true", help="also N separate one-core processes at once"
    )
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    cores = physical_first(sorted(os.sched_getaffinity(0)))
    need = max(counts) + 1 + args.server_workers
    if len(cores) < need:
        raise SystemExit(f"{len(cores)} cores; --workers {args.workers} needs {need}")
    server_cpus = ",".join(str(c) for c in cores[-args.server_workers :])
    work = Path(tempfile.mkdtemp(prefix="golive-scaling-"))
    work.chmod(0o755)
    write_bodies(work / "www", {"o64.sse": 64})
    nginx = Nginx(work, free_port(), server_cpus, workers=args.server_workers)
    nginx.start()
    url = f"http://127.0.0.1:{nginx.port}/o64"
    window = ["--duration", str(args.duration)]
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for _ in range(args.runs):
            one = drive(
                str(cores[0]), "max_rps", url, "--concurrency", str(args.concurrency), *window
            )
            runs.setdefault("one_core", []).append(one)
            print(f"one core: {one['rps']:.0f} requests/s", flush=True)
            for n in counts:
                cpus = ",".join(str(c) for c in cores[: n + 1])
                concurrency = str(args.concurrency * n)
                r = drive(
                    cpus,
                    "max_rps_workers",
                    url,
                    "--concurrency",
                    concurrency,
                    "--workers",
                    str(n),
                    *window,
                )
                runs.setdefault(f"workers_{n}", []).append(r)
                print(f"workers {n} on cpus {cpus}: {r['rps']:.0f} requests/s", flush=True)
                if args.independent:
                    c = independent(
                        cores[:n], "max_rps", url, "--concurrency", str(args.concurrency), *window
                    )
                    runs.setdefault(f"independent_{n}", []).append(c)
                    print(f"{n} separate processes: {c['rps']:.0f} requests/s", flush=True)
    finally:
        nginx.stop()
    rows = scaling_rows(runs, counts)
    machine = (
        f"{cpu_model()}, {len(cores)} CPUs (order {cores}), Python {platform.python_version()}"
    )
    out = {
        "machine": machine,
        "recorded": time.strftime("%Y-%m-%d"),
        "runs": args.runs,
        "duration_s": args.duration,
        "rows": rows,
        "raw": runs,
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for row in rows:
        print(f"{row['measure']:<22} {row['value']:>10.2f} {row['unit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
