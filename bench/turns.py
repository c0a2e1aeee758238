"""What each turn of golive's event loop spent its time on: a diagnostic for issue 33's loop lag.

    python bench/turns.py --turns-out turns.json -m golive capacity --target URL ... --out B
    python bench/turns.py --turns-out turns.json --script bench/burst.py URL --runs 1

Runs golive (or a bench script) in this process with every asyncio callback timed
(`Handle._run`) and summed per turn of the loop (`BaseEventLoop._run_once`), the select()
wait left out. Writes one JSON object: the turns' work (p50, p99, p99.9, max, and how many
held the loop over 2, 5 and 10 ms), each kind of callback's count and time (a callback is
named by its task's coroutine, or its method's owner, so every socket read shows as
`_SelectorSocketTransport._read_ready`), and the 40 longest turns, each with its callbacks
by kind. The garbage collector's pauses are timed too (`gc.callbacks`), by generation, and
shown as kinds `gc genN (inside the callbacks)`: a pause happens inside a callback and is
already in its time, so it is not added to the turn's work again. Diagnostic only: timing
every callback costs ~1 µs each, so the figures run a little high; compare kinds, not
absolute totals, with an unprofiled run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import json
import runpy
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

_LONGEST = 40


class TurnLog:
    """Callbacks' time per turn of the loop, and per kind of callback over the run."""

    def __init__(self, skip: str) -> None:
        self.turn_ns: list[int] = []
        self.kind_count: Counter[str] = Counter()
        self.kind_ns: Counter[str] = Counter()
        self.kind_max_ns: Counter[str] = Counter()
        self.longest: list[tuple[int, int, dict[str, list[int]]]] = []  # a heap
        self.longest_traffic: list[tuple[int, int, dict[str, list[int]]]] = []  # the same,
        # without the turns of `skip` (the programme's task at a window's boundary)
        self.skip = skip
        self._turn: dict[str, list[int]] = {}
        self._turn_total = 0

    def callback(self, kind: str, ns: int) -> None:
        entry = self._turn.get(kind)
        if entry is None:
            self._turn[kind] = [1, ns]
        else:
            entry[0] += 1
            entry[1] += ns
        self._turn_total += ns

    def gc_pause(self, generation: int, ns: int) -> None:
        """A collection's pause, shown beside the callback it interrupted, not added to the
        turn's work (the callback's own time already holds it)."""
        kind = f"gc gen{generation} (inside the callbacks)"
        entry = self._turn.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += ns

    def end_turn(self) -> None:
        total, turn = self._turn_total, self._turn
        self._turn, self._turn_total = {}, 0
        if not turn:
            return
        self.turn_ns.append(total)
        for kind, (count, ns) in turn.items():
            self.kind_count[kind] += count
            self.kind_ns[kind] += ns
            self.kind_max_ns[kind] = max(self.kind_max_ns[kind], ns)
        item = (total, len(self.turn_ns), turn)
        _keep(self.longest, item)
        if not any(kind.startswith(self.skip) for kind in turn):
            _keep(self.longest_traffic, item)

    def summary(self) -> dict[str, Any]:
        ns = sorted(self.turn_ns)

        def rank(p: float) -> float | None:
            return round(ns[min(len(ns) - 1, int(p / 100 * len(ns)))] / 1e6, 3) if ns else None

        kinds = sorted(self.kind_ns, key=lambda k: -self.kind_ns[k])
        return {
            "turns": len(ns),
            "turn_work_ms": {
                "p50": rank(50),
                "p99": rank(99),
                "p99.9": rank(99.9),
                "max": round(ns[-1] / 1e6, 3) if ns else None,
            },
            "turns_over_ms": {str(t): sum(1 for v in ns if v > t * 1e6) for t in (2, 5, 10)},
            "kinds": [
                {
                    "kind": k,
                    "count": self.kind_count[k],
                    "total_ms": round(self.kind_ns[k] / 1e6, 1),
                    "mean_us": round(self.kind_ns[k] / self.kind_count[k] / 1e3, 1),
                    "max_turn_ms": round(self.kind_max_ns[k] / 1e6, 3),
                }
                for k in kinds[:40]
            ],
            "longest_turns": _shown(self.longest),
            "longest_turns_without_skip": _shown(self.longest_traffic),
            "skip": self.skip,
        }


def _keep(heap: list[tuple[int, int, dict[str, list[int]]]], item: Any) -> None:
    if len(heap) < _LONGEST:
        heapq.heappush(heap, item)
    elif item[0] > heap[0][0]:
        heapq.heapreplace(heap, item)


def _shown(heap: list[tuple[int, int, dict[str, list[int]]]]) -> list[dict[str, Any]]:
    return [
        {
            "turn": index,
            "work_ms": round(total / 1e6, 3),
            "callbacks": {
                k: {"count": c, "ms": round(t / 1e6, 3)}
                for k, (c, t) in sorted(turn.items(), key=lambda kv: -kv[1][1])
            },
        }
        for total, index, turn in sorted(heap, reverse=True)
    ]


def _kind(handle: asyncio.Handle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {getattr(coro, '__qualname__', repr(coro))}"
    name = getattr(callback, "__name__", type(callback).__name__)
    if owner is not None:
        return f"{type(owner).__name__}.{name}"
    return getattr(callback, "__qualname__", name)


def install(log: TurnLog) -> None:
    """Time every callback and end a turn after each `_run_once` (all loops of this process)."""
    handle_run = asyncio.events.Handle._run
    run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]
    clock = time.perf_counter_ns

    def timed_run(self: asyncio.Handle) -> None:
        start = clock()
        try:
            handle_run(self)
        finally:
            log.callback(_kind(self), clock() - start)

    def timed_run_once(self: asyncio.AbstractEventLoop) -> None:
        run_once(self)
        log.end_turn()

    started = [0]

    def timed_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = clock()
        else:
            log.gc_pause(info["generation"], clock() - started[0])

    gc.callbacks.append(timed_gc)
    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
    asyncio.base_events.BaseEventLoop._run_once = timed_run_once  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns-out", required=True, type=Path)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("-m", dest="module")
    what.add_argument("--script")
    parser.add_argument("--skip-kind", default="task _identified")
    args, rest = parser.parse_known_args()
    log = TurnLog(args.skip_kind)
    install(log)
    code = 0
    try:
        if args.module:
            sys.argv = [args.module, *rest]
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [args.script, *rest]
            runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        log.end_turn()
        s = log.summary()
        args.turns_out.write_text(json.dumps(s, indent=1))
        print(
            f"turns {s['turns']}  work {s['turn_work_ms']}  over {s['turns_over_ms']}",
            file=sys.stderr,
        )
        for k in s["kinds"][:12]:
            print(
                f"  {k['kind'][:70]:<70} {k['count']:>8} {k['total_ms']:>9} ms "
                f"{k['mean_us']:>7} us  max/turn {k['max_turn_ms']} ms",
                file=sys.stderr,
            )
    return code


if __name__ == "__main__":
    sys.exit(main())
