"""Pure judgements of the request classes: what a gateway changed, whether an image
reached the model, whether a shared system prompt arrived unchanged. Table-tested."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from golive.bundle.request_line import RequestRecordLine
from golive.checks.gateway import request_rewritten
from golive.results import CheckClass, CheckResult, ResultsOf, Status
from golive.traffic.records import ParsedResponse

EVIDENCE = ("requests/smoke-classes.jsonl",)


CLASS_RESULT = ResultsOf(CheckClass.SMOKE, EVIDENCE)  # a request class's check


def gateway_difference(target: ParsedResponse, engine: ParsedResponse | None) -> str | None:
    """What the gateway changed, or None: the request it passed on (the engine's prompt
    tokens), then the answer's protocol, not its sampled wording."""
    if engine is None:
        return None
    if target.record.status != engine.record.status:
        return (
            f"HTTP {target.record.status} through the gateway, "
            f"{engine.record.status} from the engine"
        )
    if rewritten := request_rewritten(target, engine):
        return rewritten
    a, b = _shape(target), _shape(engine)
    for key in ("finish_reason", "tool_names", "tool_arguments", "has_content"):
        if a[key] != b[key]:
            return f"{key} differs: gateway {a[key]!r}, engine {b[key]!r}"
    return None


def _shape(parsed: ParsedResponse) -> dict[str, Any]:
    body = parsed.completion or {}
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = message.get("tool_calls") or []
    return {
        "finish_reason": choice.get("finish_reason"),
        "tool_names": [c.get("function", {}).get("name") for c in calls],
        "tool_arguments": [_json_or_text(c.get("function", {}).get("arguments")) for c in calls],
        "has_content": bool(answer_text(parsed)),
    }


def _json_or_text(value: Any) -> Any:
    try:
        return json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return value


def judge_multimodal(image: ParsedResponse, text_only: ParsedResponse) -> CheckResult:
    """A 200 is not enough: the image must reach the model (it adds prompt tokens) and the
    answer must say something."""
    with_image = (image.usage or {}).get("prompt_tokens")
    without = (text_only.usage or {}).get("prompt_tokens")
    measurements = {"prompt_tokens_with_image": with_image, "prompt_tokens_text_only": without}
    if not isinstance(with_image, int) or not isinstance(without, int):
        return CLASS_RESULT(
            "smoke.multimodal",
            Status.NO_DATA,
            "the answers carry no usage.prompt_tokens, so whether the image reached the model "
            "cannot be told",
            measurements,
        )
    if with_image <= without:
        return CLASS_RESULT(
            "smoke.multimodal",
            Status.FAIL,
            f"the image added no prompt tokens ({with_image} with it, {without} without): it "
            "did not reach the model (dropped by a gateway, or the model is text-only)",
            measurements,
        )
    if not answer_text(image):
        return CLASS_RESULT(
            "smoke.multimodal", Status.FAIL, "the image request got an empty answer"
        )
    return CLASS_RESULT(
        "smoke.multimodal",
        Status.PASS,
        f"an image request was answered; the image added {with_image - without} prompt tokens",
        measurements,
    )


def answer_text(parsed: ParsedResponse) -> str:
    """The answer's content, stripped ("" when there is none)."""
    choice = ((parsed.completion or {}).get("choices") or [{}])[0]
    return str((choice.get("message") or {}).get("content") or "").strip()


# The user messages differ only in a ticket number: a few tokens at most.
SHARED_PROMPT_SPREAD = 8


def judge_shared_prompt(
    prompts: Sequence[int | None], cached: Sequence[int | None], answers: Sequence[str]
) -> CheckResult:
    """Repeats of one system prompt must each be answered and reach the model as the same
    prompt (their prompt-token counts differ only by the user line)."""
    measurements: dict[str, Any] = {f"cached_tokens_{i}": c for i, c in enumerate(cached)}
    measurements.update({f"prompt_tokens_{i}": p for i, p in enumerate(prompts)})
    empty = [i for i, a in enumerate(answers) if not a]
    if empty:
        return CLASS_RESULT(
            "smoke.shared_prompt",
            Status.FAIL,
            f"repeat(s) {empty} of the shared system prompt got an empty answer",
            measurements,
        )
    counted = [p for p in prompts if isinstance(p, int)]
    if len(counted) < len(prompts) or not counted:
        return CLASS_RESULT(
            "smoke.shared_prompt",
            Status.NO_DATA,
            "the answers carry no usage.prompt_tokens: whether the shared prompt arrived "
            "unchanged cannot be told",
            measurements,
        )
    spread = max(counted) - min(counted)
    if spread > SHARED_PROMPT_SPREAD:
        return CLASS_RESULT(
            "smoke.shared_prompt",
            Status.FAIL,
            f"one system prompt arrived as {min(counted)} to {max(counted)} prompt tokens: it "
            "was not sent identically (a gateway or template rewrites it), so it cannot be "
            "shared or cached",
            measurements,
        )
    return CLASS_RESULT(
        "smoke.shared_prompt",
        Status.PASS,
        f"{len(counted)} requests with one system prompt answered, {min(counted)}-"
        f"{max(counted)} prompt tokens each; cached tokens per request: {list(cached)} "
        "(`golive cache` judges reuse)",
        measurements,
    )


def load_result(check_id: str, lines: Sequence[RequestRecordLine], what: str) -> CheckResult:
    """A short load of the smoke classes, judged from its saved record lines: every request
    must be answered in full."""
    bad = [line for line in lines if not line.answered]
    e2e = sorted(line.e2e_s or 0.0 for line in lines if line.ok)
    measurements = {
        "requests": len(lines),
        "failed": len(bad),
        "e2e_max_s": round(e2e[-1], 3) if e2e else None,
    }
    if not lines:
        return CLASS_RESULT(check_id, Status.NO_DATA, f"{what}: no request completed", measurements)
    if bad:
        first = bad[0]
        reason = first.failure.message if first.failure is not None else "; ".join(first.problems)
        return CLASS_RESULT(
            check_id,
            Status.FAIL,
            f"{what}: {len(bad)}/{len(lines)} failed ({reason})",
            measurements,
        )
    return CLASS_RESULT(
        check_id,
        Status.PASS,
        f"{what}: {len(lines)} requests served, slowest {e2e[-1]:.1f} s",
        measurements,
    )


def labelled(lines: Sequence[RequestRecordLine], label: str) -> list[RequestRecordLine]:
    return [line for line in lines if line.label == label]
