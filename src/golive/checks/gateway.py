"""The gateway held to the engine (issue 27 §4): with `--engine-url`, every request class and
Agent case golive sends through the gateway is also sent, unchanged, straight to the engine.
Both reach one engine with one chat template and one tokenizer, so the engine must count the
same prompt tokens for both: a gateway that injects a system prompt, drops earlier turns or
tool results, or trims a long input is named with both counts; an answer that cannot be held to
its twin (the twin missing, usage absent) leaves its check unshown (`no_data`), never passed.
Pure: two parsed answers in, the finding out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from golive.results import CheckResult, Status
from golive.traffic.records import ParsedResponse


def prompt_tokens(parsed: ParsedResponse) -> int | None:
    """The prompt tokens the engine counted for this answer (None: it said nothing)."""
    value = (parsed.usage or {}).get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def request_rewritten(target: ParsedResponse, engine: ParsedResponse | None) -> str | None:
    """What the gateway changed in the request it passed on, or None: the same prompt tokens,
    or nothing to compare (`comparison_gap` says why)."""
    if engine is None or not (target.record.ok and engine.record.ok):
        return None
    direct, via = prompt_tokens(engine), prompt_tokens(target)
    if direct is None or via is None or via == direct:
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


def comparison_gap(target: ParsedResponse | None, engine: ParsedResponse | None) -> str | None:
    """Why an answer the gateway gave cannot be held to the engine's (None: it can, or the
    gateway's answer failed and is judged as a failure): the engine's own answer to the same
    request is missing, or either answer counted no prompt tokens (a gateway that drops the
    stream's usage chunk changes no prompt, but shows none either). No comparison, no pass."""
    if target is None or not target.record.ok:
        return None
    if engine is None:
        return "the engine's own answer to the same request is not in the bundle"
    if not engine.record.ok:
        return None  # the two answers' statuses differ: a difference, judged as such
    if prompt_tokens(engine) is None:
        return "the engine's own answer counted no prompt tokens"
    if prompt_tokens(target) is None:
        return (
            "the gateway's answer carries no usage (the engine's own does): what it passed on "
            "cannot be held to what golive sent"
        )
    return None


def not_held(result: CheckResult, gaps: Sequence[str], where: str) -> CheckResult:
    """Behind a gateway a check passes only where each of its answers was held to the
    engine's answer to the same request (`comparison_gap` names each that was not, kept in
    `where`); a failure stands as it is."""
    if not gaps or result.status is not Status.PASS:
        return result
    return dataclasses.replace(
        result,
        status=Status.NO_DATA,
        summary=f"behind the gateway, {len(gaps)} answer(s) not held to the engine's own "
        f"({where}; {gaps[0]}): {result.summary}",
    )


def twin_gaps(
    pairs: Iterable[tuple[str, tuple[ParsedResponse | None, ParsedResponse | None]]],
) -> list[str]:
    """Each labelled answer (through the gateway, from the engine) that cannot be held to
    its twin, and why (`comparison_gap`): what `not_held` is given."""
    return [f"{label}: {gap}" for label, (a, b) in pairs if (gap := comparison_gap(a, b))]
