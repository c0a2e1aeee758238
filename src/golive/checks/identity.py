"""`target.identity`: every answer in the bundle came from the model being judged.

vLLM names the served model in every completion (`model`, the name it was asked for). An
answer naming another model is another deployment answering (a gateway routing elsewhere, a
shared endpoint, a mix-up of targets): nothing it measured belongs to this verdict, so the
check is critical. Judged from the raw request records, in the run and again by
`golive decide`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from golive.bundle.store import BundleReader, record_streams, stream_records
from golive.results import INTEGRITY_RESULT, CheckResult, Status
from golive.traffic.client import CHAT_PATH

CHECK_ID = "target.identity"
_MODELS_PATH = "/v1/models"


def judge_identity(evidence: BundleReader) -> list[CheckResult]:
    """One result, or none when the bundle holds no chat answer to compare."""
    served: set[str] = set()
    pairs: Counter[tuple[str, str | None]] = Counter()  # (model answered, model asked)
    answers = unnamed = 0
    files = record_streams(evidence.root)
    for path in files:
        for record in stream_records(evidence.root, path):  # unreadable: the ledger's finding
            url = record.url
            response = record.response
            if not isinstance(response, dict) or not _ok(record.http_status):
                continue
            if url.endswith(_MODELS_PATH):
                served.update(_listed(response))
                continue
            if not url.endswith(CHAT_PATH):
                continue
            answers += 1
            request = record.request
            wanted = request.get("model") if isinstance(request, dict) else None
            model = _raw_model(record.response_raw, response.get("model"))
            if not isinstance(model, str):
                unnamed += 1  # sampled out (saved without its body) or the field stripped
                continue
            pairs[model, wanted if isinstance(wanted, str) else None] += 1
    if answers == 0:
        return []
    return [_result(answers, unnamed, pairs, served, len(files))]


def _raw_model(raw: object, saved: object) -> object:
    """The model an answer names, read from the bytes the server sent where they are kept
    (`response_raw`: what every other judge parses again), else from the saved answer: an
    edit of the saved copy alone changes nothing."""
    if not isinstance(raw, str):
        return saved
    found = _RAW_MODEL.search(raw)
    return json.loads(f'"{found[1]}"') if found else None


_RAW_MODEL = re.compile(r'"model"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _result(
    answers: int,
    unnamed: int,
    pairs: Counter[tuple[str, str | None]],
    served: set[str],
    files: int,
) -> CheckResult:
    named: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    another: Counter[str] = Counter()
    for (model, wanted), n in pairs.items():
        named[model] += n
        asked[wanted or "none"] += n
        if model != wanted:
            another[f"{model} (asked {wanted})"] += n
        elif served and model not in served:
            another[f"{model} (not served here)"] += n
    seen = _tally(named)
    measurements: dict[str, float | int | str | bool | None] = {
        "answers": answers,
        "answers_naming_a_model": answers - unnamed,
        "answers_naming_another_model": sum(another.values()),
        "models_named": seen,
        "models_asked": _tally(asked),
        "served_models": ", ".join(sorted(served)) or None,
    }
    evidence = ("requests/",)
    if another:
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.FAIL,
            f"{sum(another.values())} of {answers} answers came from another model than the "
            f"one asked: {_tally(another)}; served {', '.join(sorted(served)) or 'unknown'}. "
            "Another deployment answered, so nothing measured here can be judged",
            measurements,
            evidence=evidence,
        )
    if unnamed == answers:
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.NO_DATA,
            f"none of the {answers} answers named its model (vLLM always does): which "
            "deployment answered cannot be shown; is a gateway stripping the field?",
            measurements,
            evidence=evidence,
        )
    summary = (
        f"every answer came from the model asked: {seen} of {answers} answers in {files} "
        "record file(s)"
    )
    if unnamed:
        summary = (
            f"each of the {answers - unnamed} answers that name their model came from the model "
            f"asked ({seen}) in {files} record file(s) ({unnamed} more were saved without "
            "their body or named no model)"
        )
    return INTEGRITY_RESULT(CHECK_ID, Status.PASS, summary, measurements, evidence=evidence)


def _tally(counts: Counter[str]) -> str:
    return ", ".join(f"{m} x{n}" for m, n in sorted(counts.items()))


def _ok(status: object) -> bool:
    return isinstance(status, int) and 200 <= status < 300


def _listed(response: dict[str, Any]) -> set[str]:
    data = response.get("data")
    if not isinstance(data, list):
        return set()
    return {e["id"] for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)}
