"""golive's traffic engine against GuideLLM, AIPerf and `vllm bench serve`, in one run.

Clients run on CPU 0, servers on CPU 1, all on loopback. `bench/run [--quick]` is the entry
point (it installs what is missing first); this module measures and writes the results:

  (a) max_rps                  nginx replaying a 64-token stream, concurrency 64
  (a) max_rps_workers_2        the same with --workers 2, and its ratio to one core
                               (bench/scaling.py; where this machine has too few cores,
                               the rows it wrote on a larger one, each naming it)
  (b) send_lag_p50/p99_ms_<R>rps  constant arrivals at R/s against the timing server, which
                               stamps each request's arrival; lag = arrival - the evenly
                               spaced schedule fitted to it (the same estimator for every
                               tool); golive's exact lag against its own intended send
                               times is reported as well
  (c) ttft_error_ms, itl_error_ms  the tool's median TTFT/ITL minus the server's own (20 ms
                               first token, then 5 ms apart); golive also per request, paired
  (d) rss_mb_<N>_streams       golive holding N open streams (nginx drips them); and the
                               10,000-stream rows bench/open_streams.py recorded
  (e) long_context_ratio       tokens/s of a 200K-token request with a 16K-token answer over
                               that of a short one (golive)
  (f) harness_cpu_pct          CPU of `golive capacity` (quick) or `golive run` against the
                               real CPU target, as a share of one core
  (g) gpu_loop_lag_p99_ms_*    golive's event-loop lag in `golive capacity --concurrency 256`
                               on the lent GPU host beside a bare ticker's (the host's floor):
                               the rows bench/gpu_lag.py wrote from the runs brought back
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import measures
from measures import Row
from net import free_port
from nginx import Nginx
from scaling import cpu_model
from sse import write_bodies

CLIENT_CPU, SERVER_CPU = 0, 1
TOOLS = ("golive", "guidellm", "aiperf", "vllm-bench")
MAX_RPS_RUNS = 3
FIDELITY_WORST = {
    "ttft_error_ms": measures.FARTHEST,
    "itl_error_ms": measures.FARTHEST,
    "ttft_error_paired_p99_ms": max,
    "itl_error_paired_p99_ms": max,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run")
    parser.add_argument("--quick", action="store_true", help="short phases; within 10 minutes")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    parser.add_argument("--only", help="comma-separated measures: a,b,c,d,e,f,g")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    parser.add_argument(
        "--no-poll",
        action="store_true",
        help="let idle CPUs sleep (on a VM an idle vCPU can take ~0.5 ms to wake up)",
    )
    args = parser.parse_args(argv)
    only = set((args.only or "a,b,c,d,e,f,g").split(","))
    tools = [t for t in args.tools.split(",") if t]
    work = Path(tempfile.mkdtemp(prefix="golive-bench-"))
    work.chmod(0o755)  # nginx's worker (an unprivileged user) reads the bodies under it
    started = time.monotonic()
    env = measures.Env.find(work, CLIENT_CPU, SERVER_CPU, quick=args.quick)
    rows: list[Row] = []

    def step(name: str, fn: Callable[[], list[Row]]) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {name} ...", flush=True)
        try:
            new = fn()
        except Exception as exc:  # one failed tool must not lose the others' figures
            print(f"    FAILED: {type(exc).__name__}: {str(exc)[-600:]}", flush=True)
            return
        for row in new:
            print(f"    {row.tool:<11} {row.measure:<30} {row.value:>12.3f} {row.unit}")
        rows.extend(new)

    pollers = [] if args.no_poll else [poll_idle(cpu) for cpu in (CLIENT_CPU, SERVER_CPU)]
    www = work / "nginx"
    write_bodies(www / "www", {"o64.sse": 64, "o16384.sse": 16384})
    nginx = Nginx(www, free_port(), SERVER_CPU, slow_rate_bytes=64)
    nginx.start()
    try:
        base = f"http://127.0.0.1:{nginx.port}"
        if "a" in only:
            for tool in tools:
                # three runs each, every tool (medians, the worst beside them)
                step(
                    f"(a) max requests/s: {tool} ({MAX_RPS_RUNS} runs)",
                    lambda t=tool: measures.max_rps(env, t, base, MAX_RPS_RUNS),
                )
            if "golive" in tools:
                step("(a) --workers scaling: golive", lambda: measures.workers_scaling(env))
        if "b" in only:
            # 10 s windows, three runs each, medians; --quick: every tool at 500/s, golive
            # alone at 2,000/s
            for r in (500, 2000) if args.quick else (100, 500, 1000, 2000):
                for tool in tools:
                    if tool != "golive" and r not in (100, 500, 1000):
                        continue
                    if args.quick and tool != "golive" and r != 500:
                        continue
                    runs = measures.RUNS
                    step(
                        f"(b) scheduling at {r}/s: {tool} ({runs} x 10 s)",
                        lambda t=tool, r=r, n=runs: measures.send_lag(env, t, r, n),
                    )
        if "c" in only:
            for tool in tools:
                step(
                    f"(c) timing fidelity: {tool} ({measures.RUNS} runs)",
                    lambda t=tool: measures.repeated(
                        t, lambda: measures.fidelity(env, t), FIDELITY_WORST
                    ),
                )
        if "d" in only:
            for n in (1000, 5000):
                for tool in tools if not args.quick else ["golive"]:
                    step(
                        f"(d) memory at {n} streams: {tool} ({measures.RUNS} runs)",
                        lambda n=n, t=tool: measures.repeated(
                            t,
                            lambda: measures.memory(env, base, n, t),
                            {f"rss_mb_{n}_streams": max, f"peak_pss_mb_{n}_streams": max},
                        ),
                    )
            step("(d) 10,000 open streams (recorded)", measures.open_streams)
        if "e" in only:
            step(
                f"(e) long context: golive ({measures.RUNS} runs)",
                lambda: measures.repeated(
                    "golive", lambda: measures.long_context(env, base), {"long_context_ratio": min}
                ),
            )
        if "f" in only:
            step(
                f"(f) harness CPU against the real target ({measures.RUNS} runs)",
                lambda: measures.harness_cpu(env),
            )
        if "g" in only:
            step("(g) loop lag on the GPU host (recorded there)", measures.gpu_loop_lag)
    finally:
        nginx.stop()
        for poller in pollers:
            poller.kill()
            poller.wait()
    rows.extend(measures.ratios(rows))
    here = this_machine()
    rows = [row if row.machine else dataclasses.replace(row, machine=here) for row in rows]
    # this machine's rows first, each other machine's together after them
    rows.sort(key=lambda row: (row.machine != here, row.machine))
    args.out.write_text(json.dumps([row.as_json() for row in rows], indent=1) + "\n")
    print()
    print(table(rows, here))
    print(f"\n{len(rows)} rows in {args.out} ({time.monotonic() - started:.0f} s)")
    return 0


def poll_idle(cpu: int) -> subprocess.Popen[bytes]:
    """A SCHED_IDLE busy loop on `cpu`: it runs only when nothing else wants the CPU, so
    it takes no time from a client or server, but the vCPU never halts, and waking a
    halted vCPU costs this VM about half a millisecond per wake-up (measured: p99 send lag
    at 500 requests/s 4.5 ms with idle CPUs, 1.0 ms with this). `--no-poll` turns it off."""
    return subprocess.Popen(
        ["taskset", "-c", str(cpu), "chrt", "--idle", "0", sys.executable, "-c", "while 1: pass"]
    )


def this_machine() -> str:
    """The CPU, its cores, the hypervisor and the day: every row measured here names them."""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    virt = next(
        (line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Hypervisor" in line),
        "no hypervisor named",
    )
    return (
        f"{cpu_model()}, {os.cpu_count()} vCPUs, {virt}, "
        f"Python {sys.version.split()[0]} (bench/run, {time.strftime('%Y-%m-%d')})"
    )


def table(rows: list[Row], here: str) -> str:
    """Markdown: one table per machine, this machine's first (rows measured elsewhere, such as
    the GPU host's, never share a table with this machine's); one line per measure, one
    column per tool."""
    machines = [here, *sorted({row.machine for row in rows} - {here, ""})]
    out = []
    for machine in machines:
        mine = [row for row in rows if (row.machine or here) == machine]
        if not mine:
            continue
        out.append(f"Measured on: {machine}\n\n{_one_table(mine)}")
    return "\n\n".join(out)


def _one_table(rows: list[Row]) -> str:
    measures_seen: list[str] = []
    cells: dict[tuple[str, str], str] = {}
    units: dict[str, str] = {}
    for row in rows:
        if row.measure not in measures_seen:
            measures_seen.append(row.measure)
        cells[(row.measure, row.tool)] = f"{row.value:,.{row.digits}f}"
        units[row.measure] = row.unit
    tools = [t for t in TOOLS if any(row.tool == t for row in rows)]
    lines = [
        "| measure | unit | " + " | ".join(tools) + " |",
        "|---|---|" + "---:|" * len(tools),
    ]
    for m in measures_seen:
        line = " | ".join(cells.get((m, t), "—") for t in tools)
        lines.append(f"| {m} | {units[m]} | {line} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
