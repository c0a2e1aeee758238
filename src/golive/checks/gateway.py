"""The gateway held to the engine (issue 27 §4): with `--engine-url`, every request class and
Agent case golive sends through the gateway is also sent, unchanged, straight to the engine.
Both reach one engine with one chat template and one tokenizer, so the engine must count the
same prompt tokens for both: a gateway that injects a system prompt, drops earlier turns or
tool results, or trims a long input is named with both counts. Pure: two parsed answers in,
the finding out.
"""

from __future__ import annotations

from golive.traffic.records import ParsedResponse


def prompt_tokens(parsed: ParsedResponse) -> int | None:
    """The prompt tokens the engine counted for this answer (None: it said nothing)."""
    value = (parsed.usage or {}).get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def request_rewritten(target: ParsedResponse, engine: ParsedResponse | None) -> str | None:
    """What the gateway changed in the request it passed on, or None: the same prompt tokens,
    or nothing to compare (no engine twin, either answer failed, or the engine's own answer
    counted nothing). The engine's count through the gateway being absent is a change too: the
    gateway removed the usage the engine returns, so the request it sent cannot be shown."""
    if engine is None or not (target.record.ok and engine.record.ok):
        return None
    direct = prompt_tokens(engine)
    if direct is None:
        return None
    via = prompt_tokens(target)
    if via is None:
        return (
            f"the gateway's answer carries no usage (the engine's own counted {direct} prompt "
            "tokens): the gateway removed it, so what it sent the engine cannot be shown"
        )
    if via == direct:
        return None
    change = (
        f"{via - direct} added: a system prompt or instructions injected"
        if via > direct
        else f"{direct - via} missing: earlier turns, tool results or input dropped or trimmed"
    )
    return (
        f"the engine counted {via} prompt tokens through the gateway and {direct} for the same "
        f"request sent to it directly ({change}): the gateway rewrote the request"
    )
