"""Production-shaped Agent traffic: shared system prompt, tool schemas, multi-turn state with
tool results, a share of long requests and of structured output. Pure and seeded: request
`n` of a workload is always the same body, so a run can be replayed and compared.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.errors import ConfigError

_WORDS = [
    "deployment",
    "latency",
    "cache",
    "shard",
    "replica",
    "tenant",
    "invoice",
    "ledger",
    "region",
    "quota",
    "policy",
    "audit",
    "rollback",
    "canary",
    "gateway",
    "token",
    "budget",
    "schema",
    "retry",
    "backoff",
    "queue",
    "window",
    "metric",
    "alert",
    "incident",
    "owner",
    "deadline",
    "contract",
    "vendor",
    "storage",
    "network",
    "topology",
    "driver",
    "runtime",
    "kernel",
]


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    system_prompt_words: int = 450
    tools: int = 3
    tool_properties: int = 4
    turns: int = 2
    long_share: float = 0.2
    long_prompt_words: int = 1500
    structured_share: float = 0.25
    max_tokens: int = 24
    seed: int = 0


_ENDS_SENTENCE = [word + "." for word in _WORDS]  # every 13th word closes a sentence
_PICK_BITS = len(_WORDS).bit_length()  # `choice`'s draw: the top bits of a 32-bit output
# a draw's top byte -> the word it picks, or 255 where `choice` would draw again
_PICK = bytes(
    b >> (8 - _PICK_BITS) if b >> (8 - _PICK_BITS) < len(_WORDS) else 255 for b in range(256)
)


def filler(words: int, seed: int) -> str:
    """Deterministic prose-like text of `words` words (no two seeds share a prefix).

    The words are those `random.Random(seed).choice(_WORDS)` picks one after another, as
    this text has always been made, drawn in bulk instead: `choice` takes the top
    `len(_WORDS).bit_length()` bits of the generator's next 32-bit output and draws again
    where they name no word, and `getrandbits(32 * m)` is the next m outputs, the first
    lowest, whatever the host's byte order. A capacity body of ~800 words took ~4 calls a
    word in `random` (issue 33); now a few calls a body."""
    rng = random.Random(seed)  # noqa: S311 - text generation, not security
    picks = bytearray()
    while len(picks) < words:
        draws = 2 * (words - len(picks)) + 8  # over half of the draws name a word
        top_bytes = rng.getrandbits(32 * draws).to_bytes(4 * draws, "little")[3::4]
        picks += top_bytes.translate(_PICK).replace(b"\xff", b"")
    del picks[words:]
    out = [f"[{seed}]"]
    out += [_WORDS[r] for r in picks]
    for i in range(12, words, 13):
        out[i + 1] = _ENDS_SENTENCE[picks[i]]
    return " ".join(out)


@functools.lru_cache(maxsize=8)
def _system_prompt(words: int, seed: int) -> str:
    """The workload's shared system prompt: the same for every request of a run, made once."""
    return "You are the operations agent. " + filler(words, seed)


def tool_schemas(shape: WorkloadShape) -> list[dict[str, Any]]:
    """The fixed tool set: names, descriptions and object parameters with required keys."""
    tools = []
    for t in range(shape.tools):
        props = {
            f"field_{p}": {
                "type": "string" if p % 2 == 0 else "integer",
                "description": f"{_WORDS[p]} value",
            }
            for p in range(shape.tool_properties)
        }
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"lookup_{_WORDS[t * 3 % len(_WORDS)]}",
                    "description": f"Look up {_WORDS[t]} records for the current {_WORDS[t + 1]}.",
                    "parameters": {"type": "object", "properties": props, "required": ["field_0"]},
                },
            }
        )
    return tools


STRUCTURED_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject", "escalate"]},
        "reason": {"type": "string"},
    },
    "required": ["decision", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class AgentWorkload:
    """Request bodies for `model` in the given shape; `body(n)` is pure in `n`."""

    shape: WorkloadShape
    model: str

    def kind(self, n: int) -> str:
        rng = random.Random(self.shape.seed * 1_000_003 + n)  # noqa: S311
        roll = rng.random()
        if roll < self.shape.long_share:
            return "long"
        if roll < self.shape.long_share + self.shape.structured_share:
            return "structured"
        return "agent"

    def body(self, n: int) -> dict[str, Any]:
        shape = self.shape
        kind = self.kind(n)
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": _system_prompt(shape.system_prompt_words, shape.seed),
            }
        ]
        tools = tool_schemas(shape)
        for turn in range(shape.turns):
            call_id = f"call_{n}_{turn}"
            name = tools[turn % len(tools)]["function"]["name"] if tools else "lookup"
            messages += [
                {
                    "role": "user",
                    "content": f"Step {turn}: check the {_WORDS[(n + turn) % len(_WORDS)]} status.",
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": json.dumps({"field_0": f"item-{n}-{turn}"}),
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": json.dumps(
                        {"status": "ok", "records": turn + 1, "note": filler(12, n * 7 + turn)}
                    ),
                },
            ]
        question = f"Request {n}: summarise what to do next in one sentence."
        if kind == "long":
            report = filler(shape.long_prompt_words, 10_000 + n)
            question = f"Read this report and answer request {n}:\n{report}"
        messages.append({"role": "user", "content": question})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": shape.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if kind == "structured":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "decision",
                    "schema": dict(STRUCTURED_SCHEMA),
                    "strict": True,
                },
            }
        elif tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body


@dataclass(frozen=True, slots=True)
class SampleWorkload:
    """A user's own request sample, replayed in turn for `model`."""

    sample: tuple[Mapping[str, Any], ...]
    model: str

    def body(self, n: int) -> dict[str, Any]:
        return {**self.sample[n % len(self.sample)], "model": self.model}


def read_sample(path: Path, model: str) -> list[dict[str, Any]]:
    """A user sample: JSONL of chat-completion bodies; the model is set to the target's."""
    bodies = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"--sample {path}: cannot be read ({exc.strerror})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            body = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--sample {path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ConfigError(
                f"--sample {path}:{number}: each line must be a chat body with 'messages'"
            )
        bodies.append({**body, "model": model})
    if not bodies:
        raise ConfigError(f"--sample {path}: no requests in the file")
    return bodies
