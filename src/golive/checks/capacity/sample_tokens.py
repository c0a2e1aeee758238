"""The user's workload sample, counted in tokens by the server's own tokenizer (issue 29 §5).

A sample body carries messages, not token counts, so the report could set the sample's shape
beside what was sent only in messages and `max_tokens`. Before the load windows, each of up
to `MAX_COUNTED` sample bodies (spread over the sample) is sent to vLLM's `/tokenize` with its
messages and tools, under the chat template, and the answers are kept as records
(`requests/workload-sample-tokens.jsonl`, label `sample-<index>`): the report reads the
counts from them. A server without `/tokenize` (or one that refuses, or does not answer in
`ASK_TIMEOUT_S`) is asked once, and leaves the column empty, never a guess. Behind a gateway
(`--engine-url`) the engine counts, under its own name for the model: a gateway seldom passes
`/tokenize` on, and the engine's tokenizer is the one that counts what it is sent.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any

from golive.bundle.layout import SAMPLE_TOKENS_STREAM
from golive.checks.context import CheckContext
from golive.checks.engine_name import EngineTwin

SAMPLE_LABEL = "sample-"  # + the line's index in the sample
MAX_COUNTED = 50  # bodies counted, spread over the sample: percentiles, not every line
ASK_TIMEOUT_S = 30.0  # one count; a server slower than this is not asked the rest


def tokenize_body(model: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `/tokenize` request counting a sample body's prompt as the chat endpoint renders
    it (None for a body without a message list)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    request: dict[str, Any] = {"model": model, "messages": messages}
    if body.get("tools"):
        request["tools"] = body["tools"]
    return request


def counted_indexes(size: int) -> range:
    """Which sample lines are counted: every one up to MAX_COUNTED, else evenly spread."""
    return range(0, size, max(1, math.ceil(size / MAX_COUNTED)))


async def count_sample_tokens(
    ctx: CheckContext, model: str, sample: Sequence[Mapping[str, Any]]
) -> None:
    """Ask the server (behind a gateway, the engine) to count the sample's prompts; each
    answer is saved as it comes."""
    counter = ctx.engine or ctx.target
    name = counter.name if isinstance(counter, EngineTwin) else model
    for index in counted_indexes(len(sample)):
        request = tokenize_body(name, sample[index])
        if request is None:
            continue
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                record = await counter.post("/tokenize", request, f"{SAMPLE_LABEL}{index}")
        except TimeoutError:
            return  # a server that does not count promptly is not waited on: the load is due
        ctx.save(record, SAMPLE_TOKENS_STREAM)
        if not record.ok:  # no /tokenize here (404), or not for us: the rest would say so too
            return
