"""Preflight (issue 30 §1): before any bundle is opened or load is spent, one `GET
/v1/models` says whether the target can be measured at all. A refused connection, an unknown
host, TLS, no answer, 401/403, a 404 (a URL ending in `/v1`), a body that is not an
OpenAI-compatible model list, or a served model other than `target.model` stops golive in
seconds with the fix (`TargetNotMeasurable`, exit 4) and no verdict about the deployment. A
server that answers the list is measured as before, whatever it does next.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from golive.env_names import shown_env_name
from golive.errors import ConfigError, TargetNotMeasurable
from golive.traffic.client import ClientSettings, TargetClient
from golive.traffic.records import FailureKind, RequestRecord

MODELS_PATH = "/v1/models"
PREFLIGHT_TIMEOUT_S = 30.0  # the list is one small answer: a server silent this long is not serving


async def preflight(settings: ClientSettings, model: str | None) -> list[str]:
    """Ask the target for its model list with short timeouts; the ids it serves, or
    `TargetNotMeasurable` naming what is wrong and the fix."""
    wait_s = min(settings.read_timeout_s, PREFLIGHT_TIMEOUT_S)
    quick = dataclasses.replace(
        settings,
        connect_timeout_s=min(settings.connect_timeout_s, 10.0),
        read_timeout_s=wait_s,
        request_deadline_s=wait_s,
    )
    try:
        async with TargetClient(quick) as client:
            record = await client.get(MODELS_PATH, "preflight-models")
    except (UnicodeError, ValueError) as exc:  # a host or port the URL parser refuses
        raise ConfigError(  # a usage error, whatever a log could add: exit 2
            f"--target {settings.base_url} is not a valid URL ({exc}); give scheme, host and "
            "port, e.g. http://host:8000"
        ) from exc
    problem, served = not_measurable(record, settings.base_url, model, settings.api_key_env, wait_s)
    if problem is not None:
        raise TargetNotMeasurable(f"target not measurable: {problem}")
    return served


def not_measurable(
    record: RequestRecord,
    base_url: str,
    model: str | None,
    key_env: str | None,
    wait_s: float = PREFLIGHT_TIMEOUT_S,
) -> tuple[str | None, list[str]]:
    """Pure: why the `/v1/models` answer in `record` means the target cannot be measured
    (None: it can), and the model ids it lists."""
    url = f"{base_url.rstrip('/')}{MODELS_PATH}"
    failure = record.failure
    if record.status is None:
        message = failure.message if failure is not None else "no answer"
        if failure is not None and failure.kind is FailureKind.TIMEOUT:
            return (
                f"{url} gave no answer within {wait_s:g} s ({message}): the "
                "server accepts connections but does not serve; check that vLLM finished "
                "starting (its log says 'Application startup complete') and that nothing in "
                "front of it holds requests",
                [],
            )
        return (
            f"{url} could not be reached ({message}): check --target (scheme, host, port), "
            "that the server is running and listening there, and for https its certificate",
            [],
        )
    if record.status in (401, 403):
        fix = (
            "set --api-key-env NAME (the environment variable holding the key)"
            if key_env is None
            else f"the key in {shown_env_name(key_env)} was refused: check its value"
        )
        return f"{url} answered HTTP {record.status} (not authorised): {fix}", []
    if record.status == 404:
        path = base_url.rstrip("/")
        if path.endswith("/v1"):
            return (
                f"{url} answered HTTP 404: --target ends in /v1, and golive adds /v1 itself; "
                f"drop it (--target {path.removesuffix('/v1')})",
                [],
            )
        return (
            f"{url} answered HTTP 404: this is not an OpenAI-compatible server at that base "
            "URL; give the URL vLLM serves /v1/models under (e.g. http://host:8000)",
            [],
        )
    if 300 <= record.status < 400:
        where = (record.headers or {}).get("location")
        return (
            f"{url} answered HTTP {record.status}, a redirect"
            + (f" to {where}" if where else "")
            + ": golive does not follow redirects (a login page, or http to https); give the "
            "URL the server itself answers on",
            [],
        )
    if not 200 <= record.status < 300:
        return None, []  # a server error is the deployment's: measured and judged as such
    served = model_ids(record.raw_text)
    if served is None:
        return (
            f"{url} answered HTTP {record.status}, but not with an OpenAI-compatible model list "
            f"({_shown(record.raw_text)}): point --target at the vLLM server itself",
            [],
        )
    if model is not None and model not in served:
        listed = ", ".join(served) or "none"
        return (
            f"the server serves {listed}, not target.model {model!r}: fix --model (or "
            "target.model), or point --target at the deployment that serves it",
            served,
        )
    if not served:
        return f"{url} lists no model: the server serves nothing to measure", []
    return None, served


def model_ids(text: str) -> list[str] | None:
    """The ids of an OpenAI `/v1/models` answer (`{"data": [{"id": ...}]}`); None where the
    body is not one."""
    try:
        body: Any = json.loads(text)
    except ValueError:
        return None
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    ids = [entry.get("id") for entry in data if isinstance(entry, Mapping)]
    if not all(isinstance(i, str) for i in ids):
        return None
    return [str(i) for i in ids]


def _shown(text: str) -> str:
    """A body as a short line: tags and runs of space removed, 80 characters at most."""
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", text)).strip()
    if not plain:
        return "an empty body"
    return repr(plain[:80] + ("..." if len(plain) > 80 else ""))
