"""`golive run` as the scenario tests call it: the whole programme with sizes a 2-core CPU
target finishes in a few minutes (every section runs; only the loads are small)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.cli.main import main
from golive.target.server import RunningTarget

SMALL_RUN = """\
smoke: {classes: false}
capacity:
  concurrency: 4
  max_context: 256
  system_prompt_words: 40
  tools: 1
  turns: 1
  long_share: 0.0
  max_tokens: 6
  long_max_tokens: 4
  step_duration_s: 6
  # golive lengthens it (up to 2x) to the ramp's rate for the 30 completions a drift is
  # judged on: at the ceiling of 4 here 68 and 72 answers came in 15 s; 40 s at most holds
  # them down to ~0.95 answers/s (a slow box's ceiling of 1)
  duration_s: 20
  # windows of seconds, judged as before the decision floor (tested on its own: 10 minutes and
  # 30 answers by default)
  min_sustained_s: 0
  min_sustained_completions: 1
  answer_probes: false  # the demo proves them on this engine
agent:
  repeat: 1
  temperature: 0.0
  concurrency: 4
  cases: [one_arg.required, structured]
"""


# A smoke section of the one text request only: the classes left out, as a config says of an
# application that does not use them (so the section is judged complete, as it is meant).
TEXT_ONLY: dict[str, Any] = {
    "smoke.classes": False,
    "programme.not_used": [
        {"part": "smoke.classes", "owner": "golive tests", "reason": "one text request only"}
    ],
}


# For a whole-programme run whose subject is another section (a hold it must name): every
# section still runs, the load windows are short (~1 min less of the suite a run).
SHORT_LOAD = ("--concurrency", "2", "--step-duration", "4", "--duration", "10")


# Small, production-shaped capacity requests: the CPU target decodes ~5 tokens/s on one core.
# Test windows last seconds: judged without the decision floor (10 minutes, 30 answers by
# default), which has tests of its own.
NO_FLOOR: dict[str, Any] = {"capacity.min_sustained_s": 0, "capacity.min_sustained_completions": 1}
NO_FLOOR_ARGS = ("--min-sustained", "0", "--min-completions", "1")
# a capacity section against a fake that answers in milliseconds: 1.5 s windows to 4
FAKE_CAPACITY: dict[str, Any] = {
    **NO_FLOOR,
    "capacity.concurrency": 4,
    "capacity.step_duration_s": 1.5,
    "capacity.calibration_s": 1.5,
    "capacity.duration_s": 3.0,
    "capacity.max_context": 256,
    "capacity.answer_probes": False,
}


SMALL_REQUESTS = {
    "capacity.system_prompt_words": 40,
    "capacity.tools": 1,
    "capacity.turns": 1,
    "capacity.long_share": 0.0,
    "capacity.max_tokens": 6,
    "capacity.long_max_tokens": 4,
    **NO_FLOOR,
}


def small_requests() -> dict[str, Any]:
    """SMALL_REQUESTS as a config file's `capacity:` mapping."""
    return {key.removeprefix("capacity."): value for key, value in SMALL_REQUESTS.items()}


async def golive_run(target: RunningTarget, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """The programme against a local target, with its startup log as the SRE would give it."""
    config = out.parent / "run-config.yaml"
    config.write_text(SMALL_RUN)
    argv = [
        "run",
        "--target",
        target.url,
        "--log",
        str(target.log_path),
        "--out",
        str(out),
        "--config",
        str(config),
        "--prefix-tokens",
        "320",
        "--warm-repeats",
        "2",
        "--cold-samples",
        "1",
        "--json",
        *extra,
    ]
    code = await asyncio.to_thread(main, argv)
    return code, json.loads((out / "verdict.json").read_text())


def rules(verdict: dict[str, Any]) -> dict[str, list[str]]:
    return {r["rule"]: r["checks"] for r in verdict["rules_fired"]}


@dataclass(frozen=True)
class KeyedRun:
    """One `golive run` of the scenario sizes (tests/helpers/scenario.py) on the session's
    target, as a user starts it: the console module in its own process, an API key read from
    a named environment variable, a JUnit file, its output logged."""

    out: Path
    code: int
    canary: str
    env: dict[str, str]
    log: Path
    junit: Path

    @property
    def verdict(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.out / "verdict.json").read_text())
        return loaded
