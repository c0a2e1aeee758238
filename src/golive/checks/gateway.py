"""The gateway held to the engine (issue 27 §4): with `--engine-url`, every request class and
Agent case golive sends through the gateway is also sent, unchanged, straight to the engine.
Both reach one engine with one chat template and one tokenizer, so the engine must receive the
same prompt for both. Each such request asks vLLM for the prompt it rendered (`ASK_PROMPT`:
its token ids, and its text where the engine can give it); the two token sequences must be
equal, so a gateway that injects a system prompt, drops earlier turns or tool results, trims a
long input or rewrites a message keeping its length is named, with where the prompts part.
Where the gateway's answer does not carry the ids (an engine older than `return_token_ids`, a
gateway that drops fields it does not know) the engine's prompt-token counts are compared
instead, and a passing check says it was held by count only. An answer that cannot be held to
its twin (the twin missing, usage absent) leaves its check unshown (`no_data`), never passed.
Pure: two parsed answers in, the finding out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from golive.results import CheckResult, Status, measured_int
from golive.traffic.records import ParsedResponse

# vLLM's own request fields: the answer carries the prompt as the engine rendered it
# (`prompt_token_ids`; `prompt_text` where the version has it). Other servers ignore them.
ASK_PROMPT = {"return_token_ids": True, "return_prompt_text": True}
_SHOWN = 60  # characters of each prompt shown where the two part


def asking_prompt(body: Mapping[str, Any], gateway_asks: bool = True) -> dict[str, Any]:
    """A chat body that also asks the engine for the prompt it rendered (`ASK_PROMPT`), where
    the gateway passes those fields on (`gateway_asks`: a strict gateway refuses them, and
    the body goes as it is)."""
    return {**body, **ASK_PROMPT} if gateway_asks else dict(body)


def asked_prompt(parsed: ParsedResponse | None) -> bool:
    """The saved request asked for the prompt the engine rendered: golive sent it behind a
    gateway, held to the engine (whatever the saved config says)."""
    body = None if parsed is None else parsed.record.body
    return isinstance(body, Mapping) and body.get("return_token_ids") is True


def _same_request(target: ParsedResponse, engine: ParsedResponse) -> bool:
    """The engine's twin was asked what the gateway was (the model's name aside)."""
    a, b = target.record.body, engine.record.body
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return False
    return {**a, "model": None} == {**b, "model": None}


def _first_difference(a: Sequence[object], b: Sequence[object]) -> int:
    """Where two sequences part: the first index they differ at, or the shorter's length
    where one is the other's start."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def prompt_tokens(parsed: ParsedResponse) -> int | None:
    """The prompt tokens the engine counted for this answer (None: it said nothing)."""
    return measured_int((parsed.usage or {}).get("prompt_tokens"))


def request_rewritten(target: ParsedResponse, engine: ParsedResponse | None) -> str | None:
    """What the gateway changed in the request it passed on, or None: the same prompt (its
    token ids where both answers carry them, else its token count), or nothing to compare
    (`comparison_gap` says why)."""
    if engine is None or not (target.record.ok and engine.record.ok):
        return None
    if target.prompt_token_ids is not None and engine.prompt_token_ids is not None:
        return _prompts_differ(target, engine)
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


def _prompts_differ(target: ParsedResponse, engine: ParsedResponse) -> str | None:
    via, direct = target.prompt_token_ids or (), engine.prompt_token_ids or ()
    if via == direct:
        return None
    at = _first_difference(via, direct)
    change = (
        f"{len(via) - len(direct)} tokens added: a system prompt or instructions injected"
        if len(via) > len(direct)
        else f"{len(direct) - len(via)} tokens missing: earlier turns, tool results or input "
        "dropped or trimmed"
        if len(via) < len(direct)
        else "as many tokens, other ones: a message rewritten"
    )
    return (
        f"the engine received another prompt through the gateway ({len(via)} tokens) than "
        f"for the same request sent to it directly ({len(direct)}), first different at token "
        f"{at} ({change}){_where_texts_part(target.prompt_text, engine.prompt_text)}: the "
        "gateway rewrote the request"
    )


def _where_texts_part(via: str | None, direct: str | None) -> str:
    """Where the two rendered prompts part, shown from each side; empty where the engine
    gave no text."""
    if via is None or direct is None or via == direct:
        return ""
    at = _first_difference(via, direct)
    start = max(0, at - 10)
    return (
        f"; through the gateway …{via[start : at + _SHOWN]!r}, directly "
        f"…{direct[start : at + _SHOWN]!r}"
    )


def held_by_count_only(target: ParsedResponse | None, engine: ParsedResponse | None) -> bool:
    """The gateway's answer does not carry the prompt the engine received (it dropped the
    field, or refused vLLM's prompt fields so golive did not ask): the two are held by
    prompt-token count only (a rewrite that keeps the length is not seen)."""
    return (
        target is not None
        and engine is not None
        and target.record.ok
        and engine.record.ok
        and target.prompt_token_ids is None
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
    if not _same_request(target, engine):
        return "the engine's answer saved beside it was not asked the same request"
    if not engine.record.ok:
        return None  # the two answers' statuses differ: a difference, judged as such
    if asked_prompt(engine) and engine.prompt_token_ids is None:
        return (
            "the engine's own answer carries no prompt_token_ids though the request asked for "
            "them (vLLM gives them from 0.10.2)"
        )
    if target.prompt_token_ids is not None and engine.prompt_token_ids is not None:
        return None  # the prompts themselves are compared
    if prompt_tokens(engine) is None:
        return "the engine's own answer counted no prompt tokens"
    if prompt_tokens(target) is None:
        return (
            "the gateway's answer carries no usage (the engine's own does): what it passed on "
            "cannot be held to what golive sent"
        )
    return None


def not_held(
    result: CheckResult, gaps: Sequence[str], where: str, by_count: int = 0
) -> CheckResult:
    """Behind a gateway a check passes only where each of its answers was held to the
    engine's answer to the same request (`comparison_gap` names each that was not, kept in
    `where`); a failure stands as it is. A pass whose answers were held by prompt-token
    count only (`by_count` of them, `held_by_count_only`) says so."""
    if result.status is not Status.PASS:
        return result
    if not gaps:
        if not by_count:
            return result
        return dataclasses.replace(
            result,
            summary=f"{result.summary} (behind the gateway, {by_count} answer(s) held to the "
            "engine's by prompt-token count only: the gateway's answers carry no "
            "prompt_token_ids, so a rewrite that keeps the prompt's length is not seen)",
        )
    return dataclasses.replace(
        result,
        status=Status.NO_DATA,
        summary=f"behind the gateway, {len(gaps)} answer(s) not held to the engine's own "
        f"({where}; {gaps[0]}): {result.summary}",
    )


Pairs = Iterable[tuple[str, tuple[ParsedResponse | None, ParsedResponse | None]]]


def twin_gaps(pairs: Pairs) -> tuple[list[str], int]:
    """Each labelled answer (through the gateway, from the engine) that cannot be held to
    its twin, and why (`comparison_gap`); and how many were held by count only
    (`held_by_count_only`): what `not_held` is given."""
    gaps, by_count = [], 0
    for label, (a, b) in pairs:
        if gap := comparison_gap(a, b):
            gaps.append(f"{label}: {gap}")
        by_count += held_by_count_only(a, b)
    return gaps, by_count


def held_to_engine(result: CheckResult, pairs: Pairs, where: str) -> CheckResult:
    """A check's result behind a gateway, its labelled answer pairs held to the engine's
    (`twin_gaps`, then `not_held`)."""
    gaps, by_count = twin_gaps(pairs)
    return not_held(result, gaps, where, by_count)
