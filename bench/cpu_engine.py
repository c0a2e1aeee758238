"""How fast the bundled vLLM (CPU) answers, and what another process on the machine costs it.

    python bench/cpu_engine.py LABEL [--corunner idle|nice|none] [--dtype D] [KEY=VALUE ...]

Starts the bundled Qwen target (`golive.target`) with KEY=VALUE added to its environment
(for example VLLM_CPU_NUM_OF_RESERVED_CPU=1 for one compute thread, or
VLLM_CPU_OMP_THREADS_BIND=1 to pin it to core 1), optionally beside a busy loop (`idle`:
SCHED_IDLE, `nice`: niceness 15, the pure test tiers' old priority), sends the same small
chat requests a test sends, and prints one JSON line: answers per second at concurrency 1
and 4 with 6 and 64 output tokens, one 200-token answer, the milliseconds a decoded token
takes with one and four answers in the batch, and a 400- and a 1,000-token prefill's
seconds. Two runs at once (each with its own core bound) measure two engines side by side;
`--dtype` serves another dtype than golive's choice for the CPU. Measured on 2026-12-06 and
2026-12-07: docs/development.md, "What another process costs the engine" and "Why `make
test` is not under 15 minutes on the 2-core VMs seen".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from tempfile import mkdtemp

import aiohttp

from golive.target.install import ensure_target
from golive.target.server import ServeOptions, start_target, stop_target

PROMPT = "Write a short note about the weather in the city of Paris during the spring months. " * 6
# (concurrency, answers, max_tokens)
LEVELS = ((1, 20, 6), (4, 40, 6), (4, 12, 64), (1, 3, 200))
BUSY_LOOP = "while True: pass"
STEPS = 64  # decode steps timed per batch size


async def answer(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    max_tokens: int,
    prompt: str = PROMPT,
    whole: bool = False,
) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": whole,  # vLLM's extra parameter: every one of max_tokens is decoded
    }
    async with session.post(f"{url}/v1/chat/completions", json=body) as reply:
        reply.raise_for_status()
        await reply.read()


async def rate(
    session: aiohttp.ClientSession, url: str, model: str, level: tuple[int, int, int]
) -> float:
    concurrency, answers, max_tokens = level
    left = list(range(answers))

    async def client() -> None:
        while left:
            left.pop()
            await answer(session, url, model, max_tokens)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return answers / (time.perf_counter() - start)


async def step_ms(session: aiohttp.ClientSession, url: str, model: str, concurrency: int) -> float:
    """The milliseconds a decoded token takes with `concurrency` answers in the batch: each
    decodes STEPS tokens whatever it says (distinct prompts, so none waits on another's
    prefill from a cache), and the answers' wall time is divided by STEPS, so the short
    prompts' prefill and HTTP are in it too."""
    began = time.perf_counter()
    await asyncio.gather(
        *(
            answer(session, url, model, STEPS, f"Tell me a story, number {i}.", whole=True)
            for i in range(concurrency)
        )
    )
    return (time.perf_counter() - began) / STEPS * 1000


def corunner(kind: str) -> subprocess.Popen[bytes] | None:
    if kind == "none":
        return None
    prefix = ["chrt", "-i", "0"] if kind == "idle" else ["nice", "-n", "15"]
    return subprocess.Popen([*prefix, sys.executable, "-c", BUSY_LOOP])


async def measure(
    label: str, kind: str, env: dict[str, str], dtype: str | None = None
) -> dict[str, object]:
    os.environ.update(env)  # start_target passes the environment on to the server
    paths = await ensure_target("qwen")
    began = time.perf_counter()
    options = ServeOptions(dtype=dtype)
    target = await start_target(paths, options, Path(mkdtemp()), progress=lambda _: None)
    result: dict[str, object] = {"label": label, "corunner": kind, "env": env, "dtype": dtype}
    result["start_s"] = round(time.perf_counter() - began, 1)
    busy = corunner(kind)
    try:
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            model = paths.spec.served_name
            await answer(session, target.url, model, 6)  # the first answer warms the engine
            for level in LEVELS:
                name = f"c{level[0]}_tokens{level[2]}_per_s"
                result[name] = round(await rate(session, target.url, model, level), 2)
            for concurrency in (1, 4):
                ms = await step_ms(session, target.url, model, concurrency)
                result[f"step_ms_c{concurrency}"] = round(ms)
            for words in (400, 1000):
                began = time.perf_counter()
                # a prompt no cache holds: the whole prefill
                await answer(session, target.url, model, 1, "word " * words + str(time.time()))
                result[f"prefill_{words}_s"] = round(time.perf_counter() - began, 2)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        await stop_target(target)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("label")
    parser.add_argument("--corunner", choices=("idle", "nice", "none"), default="none")
    parser.add_argument("--dtype", help="the server's --dtype (default: golive's for the CPU)")
    parser.add_argument("env", nargs="*", help="KEY=VALUE for the server's environment")
    args = parser.parse_args()
    env = dict(pair.split("=", 1) for pair in args.env)
    print(json.dumps(asyncio.run(measure(args.label, args.corunner, env, args.dtype))), flush=True)


if __name__ == "__main__":
    main()
