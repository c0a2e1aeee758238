"""Issue 33's loop-lag rows on the GPU host, from the files `bench/gpu_rows.sh floor N` brought
back: each run's windows (`capN-capacity-watchdog.jsonl`) and the bare ticker beside it
(`floorN-ticker.jsonl`). Writes bench/gpu-lag.json, whose rows bench/main.py carries into
bench/results.json, each naming the machine.

    python bench/gpu_lag.py bench/gpu-2026-12-06c-h100x1 6 7 8

Per run: golive's worst loop-lag p99 over its load windows (the calibration window left out),
and the ticker's worst p99 over the same span (its rows from the first loaded one, p99 over
1 ms, to the last). Rows: the median over the runs, and the worst run beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

MACHINE = (
    "the lent H100 host: 16 vCPUs, vLLM 0.24 at TP=1 serving a random-weight "
    "Qwen2.5-0.5B-shaped model; `golive capacity --concurrency 256` (bench/gpu_rows.sh)"
)
LOADED_MS = 1.0  # a ticker row above this is under the run's load (idle rows are 0.1-0.4 ms)


def worst_window_p99(watchdog: Path) -> tuple[float, int]:
    """The worst loop-lag p99 of a run's load windows, and the highest concurrency it reached."""
    windows = [json.loads(line) for line in watchdog.read_text().splitlines() if line]
    judged = [w for w in windows if w["label"] != "calibrate"]
    worst = max(w["client"]["loop_lag_p99_ms"] for w in judged)
    return worst, max(w["concurrency_cap"] for w in judged)


def floor_p99(ticker: Path) -> float:
    """The bare ticker's worst p99 while the run loaded the host."""
    p99 = [json.loads(line)["p99_ms"] for line in ticker.read_text().splitlines() if line]
    loaded = [i for i, value in enumerate(p99) if value > LOADED_MS]
    return max(p99[loaded[0] : loaded[-1] + 1])


def rows(folder: Path, runs: list[str]) -> list[dict[str, Any]]:
    golive, floor, reached = [], [], []
    for run in runs:
        lag, top = worst_window_p99(folder / f"cap{run}-capacity-watchdog.jsonl")
        golive.append(lag)
        reached.append(top)
        floor.append(floor_p99(folder / f"floor{run}-ticker.jsonl"))
    over = [g - f for g, f in zip(golive, floor, strict=True)]
    figures = {
        "gpu_loop_lag_p99_ms_worst_window": golive,
        "gpu_floor_p99_ms_worst_window": floor,
        "gpu_loop_lag_over_floor_ms": over,
    }
    found = []
    for measure, values in figures.items():
        found.append({"measure": measure, "value": statistics.median(values), "unit": "ms"})
        found.append({"measure": f"{measure}_worst_run", "value": max(values), "unit": "ms"})
    found.append({"measure": "gpu_loop_lag_runs", "value": len(runs), "unit": "runs"})
    at_256 = sum(top >= 256 for top in reached)
    found.append({"measure": "gpu_loop_lag_runs_reaching_c256", "value": at_256, "unit": "runs"})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("gpu-lag.json"))
    args = parser.parse_args()
    found = {
        "machine": MACHINE,
        "recorded": args.folder.name,
        "runs": [f"cap{run}" for run in args.runs],
        "rows": rows(args.folder, args.runs),
    }
    args.out.write_text(json.dumps(found, indent=1) + "\n")
    for row in found["rows"]:
        print(f"{row['measure']:<45} {row['value']:>8.3f} {row['unit']}")


if __name__ == "__main__":
    main()
