"""Fixed OpenAI chat-completion SSE bodies: what the neutral server replays, byte for byte.

Each body is a complete vLLM-shaped stream: a role chunk, one chunk per output token, a
finish chunk, a usage chunk and `data: [DONE]`. Every tool under test reads the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

MODEL = "bench-model"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1764460800,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


_WORDS = (" the", " of", " and", " to", " in", " a", " is", " that")


def token_event(i: int) -> bytes:
    """The SSE event carrying output token `i` (a word that is one token in common vocabularies)."""
    return _chunk({"content": _WORDS[i % len(_WORDS)]})


def head_event() -> bytes:
    return _chunk({"role": "assistant", "content": ""})


def tail_events(prompt_tokens: int, output_tokens: int) -> bytes:
    usage = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1764460800,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        },
    }
    return (
        _chunk({}, "length")
        + b"data: "
        + json.dumps(usage, separators=(",", ":")).encode()
        + b"\n\ndata: [DONE]\n\n"
    )


def stream_body(output_tokens: int, prompt_tokens: int = 64) -> bytes:
    events = [head_event()] + [token_event(i) for i in range(output_tokens)]
    return b"".join(events) + tail_events(prompt_tokens, output_tokens)


def write_bodies(root: Path, sizes: dict[str, int]) -> None:
    """Write `<name>` → body of that many tokens under `root` (the nginx document root)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, tokens in sizes.items():
        (root / name).write_bytes(stream_body(tokens))
