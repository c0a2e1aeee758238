"""The figures of docs/reliability.md: how golive behaves when the target, or golive itself,
fails. Runs against the fault-injecting fake in tests/helpers/fakes (no real engine needed; the
real engine's SIGKILL/SIGSTOP and the canary-key run are tests on the real target).

    .venv/bin/python bench/reliability.py [--repeats 5] [--fuzz 1500]

  faults    each target fault of the fake under `golive smoke`: check status, wall time,
            requests sent vs recorded (read timeout 1.5 s, deadline 3 s, 1 MiB answer cap)
  signals   `golive capacity` with 4 hung load requests in flight, then SIGINT or SIGTERM:
            time until the target saw the last load connection close, and until the process
            exited with its sealed bundle
  sigkill   the same, SIGKILL: the bundle's lines, and how many of them are not whole JSON
  watchdog  load windows of N s against a target that never answers: how far past
            N + drain each window ended
  fuzz      the hypothesis parser tests with N examples each (optional)
Writes bench/reliability.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from golive.bundle.layout import CAPACITY_WATCHDOG  # noqa: E402
from golive.bundle.store import verify  # noqa: E402
from golive.checks.capacity.collect import CapacityInputs  # noqa: E402
from golive.checks.capacity.phases import run_capacity  # noqa: E402
from golive.checks.context import CheckContext  # noqa: E402
from golive.checks.smoke.collect import run_smoke  # noqa: E402
from golive.config import load_config  # noqa: E402
from golive.orchestration.pipeline import judge  # noqa: E402
from golive.results import CheckResult  # noqa: E402
from tests.helpers.fakes.vllm import FakeState, fake_vllm  # noqa: E402

FAULTS = {
    "metrics_500": "smoke.metrics",
    "metrics_hang": "smoke.metrics",
    "metrics_garbage": "smoke.metrics",
    "reset_stream": "smoke.text_stream",
    "malformed_stream": "smoke.text_stream",
    "truncated_stream": "smoke.text_stream",
    "error_event": "smoke.text_stream",
    "drip": "smoke.text_stream",
    "unbounded": "smoke.text_stream",
    "hang": "smoke.text",
    "http_500": "smoke.text",
}
CAPS = {
    "target.read_timeout_s": 1.5,
    "target.request_deadline_s": 3.0,
    "target.max_response_mb": 1.0,
    "smoke.classes": False,
}
HUNG_LOAD = """\
capacity: {concurrency: 4, step_duration_s: 1, drain_s: 0.2, duration_s: 300, max_context: 256}
"""


async def faults(tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for fault, check_id in FAULTS.items():
        state = FakeState(fault=fault)
        out = tmp / f"fault-{fault}"
        started = time.monotonic()
        async with fake_vllm(state) as url:
            config = load_config(None, {"target.url": url, **CAPS})
            verdict = await judge(config, out, "smoke", run_smoke, ("smoke",))
        checks = {c["id"]: c for c in verdict.data["checks"]}
        ledger = checks["golive.ledger"]["measurements"]
        rows.append(
            {
                "fault": fault,
                "check": check_id,
                "status": checks[check_id]["status"],
                "summary": checks[check_id]["summary"],
                "outcome": verdict.data["outcome"],
                "wall_s": round(time.monotonic() - started, 2),
                "sent": ledger["sent"],
                "recorded": ledger["recorded"],
                "server_saw": state.chats,
                "sealed_intact": verify(out).ok,
            }
        )
    return rows


async def _hung_capacity(url: str, out: Path, config: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "golive", "capacity", "--target", url, "--out", str(out),
        "--config", str(config),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def _until(predicate: Any, timeout_s: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.002)
    return time.monotonic() - started


async def signals(tmp: Path, repeats: int) -> list[dict[str, Any]]:
    config = tmp / "hung.yaml"
    config.write_text(HUNG_LOAD)
    rows = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        for n in range(repeats):
            state = FakeState(fault="hang_tools")
            out = tmp / f"{sig.name}-{n}"
            async with fake_vllm(state) as url:
                proc = await _hung_capacity(url, out, config)
                await _until(lambda: state.hanging >= 4, 120)  # noqa: B023
                sent = time.monotonic()
                proc.send_signal(sig)
                load_closed = await _until(lambda: state.hanging == 0, 10)  # noqa: B023
                await proc.wait()
                exited = time.monotonic() - sent
            row: dict[str, Any] = {
                "signal": sig.name,
                "load_closed_s": round(load_closed, 3),
                "exited_s": round(exited, 3),
                "exit_code": proc.returncode,
            }
            lines = [
                line
                for path in sorted((out / "requests").glob("*.jsonl"))
                for line in path.read_text().splitlines()
            ]
            row["record_lines"] = len(lines)
            row["broken_lines"] = sum(1 for line in lines if not _is_json(line))
            if sig is not signal.SIGKILL:
                verdict = json.loads((out / "verdict.json").read_text())
                checks = {c["id"]: c for c in verdict["checks"]}
                row["outcome"] = verdict["outcome"]
                row["rule"] = verdict["rules_fired"][0]["rule"]
                row["ledger"] = checks["golive.ledger"]["measurements"]
                row["server_saw"] = state.chats
                row["sealed_intact"] = verify(out).ok
            else:
                row["sealed"] = (out / "manifest-sha256.txt").exists()
            rows.append(row)
    return rows


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


async def watchdog(tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for phase_s in (2.0, 5.0):
        state = FakeState(fault="hang_tools")
        out = tmp / f"watchdog-{phase_s:g}"
        settings = {
            "capacity.concurrency": 4,
            "capacity.step_duration_s": phase_s,
            "capacity.duration_s": phase_s,
            "capacity.drain_s": 0.5,
            "capacity.max_context": 256,
        }

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs())

        async with fake_vllm(state) as url:
            config = load_config(None, {"target.url": url, **settings})
            await judge(config, out, "capacity", programme, ("capacity",))
        for line in (out / CAPACITY_WATCHDOG).read_text().splitlines():
            window = json.loads(line)
            window["past_cap_s"] = round(window["wall_s"] - phase_s - window["drain_s"], 3)
            rows.append(window)
    return rows


def fuzz(examples: int) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_fuzz.py"],
        cwd=ROOT,
        env={**os.environ, "GOLIVE_FUZZ_EXAMPLES": str(examples)},
        capture_output=True,
        text=True,
        check=False,
    )
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return {
        "examples_per_test": examples,
        "result": tail,
        "exit_code": done.returncode,
        "wall_s": round(time.monotonic() - started, 1),
    }


def _print(results: dict[str, Any]) -> None:
    print("| fault | check | status | outcome | wall s | sent | recorded |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for r in results["faults"]:
        print(
            f"| {r['fault']} | {r['check']} | {r['status']} | {r['outcome']} | {r['wall_s']} "
            f"| {r['sent']} | {r['recorded']} |"
        )
    by_signal: dict[str, list[dict[str, Any]]] = {}
    for r in results["signals"]:
        by_signal.setdefault(r["signal"], []).append(r)
    print("\n| signal | runs | load closed, median / max s | exited, median / max s | not JSON |")
    print("| --- | ---: | --- | --- | ---: |")
    for name, rows in by_signal.items():
        closed = [r["load_closed_s"] for r in rows]
        exited = [r["exited_s"] for r in rows]
        print(
            f"| {name} | {len(rows)} | {statistics.median(closed):.3f} / {max(closed):.3f} "
            f"| {statistics.median(exited):.2f} / {max(exited):.2f} "
            f"| {sum(r['broken_lines'] for r in rows)} |"
        )
    print("\n| phase | window cap | duration s | wall s | past cap s | stopped by |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for w in results["watchdog"]:
        print(
            f"| {w['phase']} | {w['concurrency_cap']} | {w['duration_s']} | {w['wall_s']} "
            f"| {w['past_cap_s']} | {w['stopped_by']} |"
        )
    if results.get("fuzz"):
        print(f"\nfuzz: {results['fuzz']}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fuzz", type=int, default=0, help="hypothesis examples per test")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        results: dict[str, Any] = {
            "faults": await faults(tmp),
            "signals": await signals(tmp, args.repeats),
            "watchdog": await watchdog(tmp),
        }
    if args.fuzz:
        results["fuzz"] = fuzz(args.fuzz)
    (ROOT / "bench/reliability.json").write_text(json.dumps(results, indent=2) + "\n")
    _print(results)


if __name__ == "__main__":
    asyncio.run(main())
