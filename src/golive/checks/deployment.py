"""The deployment a bundle measured, read from its own evidence (issue 27 §3).

Every judging command asks `/version` and `/v1/models` when it starts
(`requests/identity.jsonl`); with what its families saved besides (their own `/version` and
`/v1/models` answers, every `/metrics` scrape's `process_start_time_seconds`, the startup
log) that says which deployment answered: the vLLM version, the served model (id, root,
max_model_len), the engine process's start time and the launch arguments. Computed the same
way in every section, so `decide --combine` can compare sections field by field, and a
section that saw two versions or two process start times names it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from golive.bundle.layout import RESTART
from golive.bundle.store import BundleReader, record_streams, stream_records
from golive.checks.context import CheckContext, scrape, served_entry, served_of
from golive.checks.engine_name import ENGINE_IDENTITY, EngineTwin, engine_model_for
from golive.checks.env.judge import serving_launch
from golive.checks.gateway import asking_prompt

IDENTITY_FILE = "identity"  # requests/identity.jsonl: /version and /v1/models at the start
FIELDS = (
    "vllm_version",
    "model",
    "model_root",
    "max_model_len",
    "process_start",
    "launch_args_digest",
)
_PROCESS_START = re.compile(r"^process_start_time_seconds(?:\{[^}]*\})? (\S+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Deployment:
    """What one bundle's evidence says of the deployment it measured (None: not seen)."""

    vllm_version: str | None = None
    model: str | None = None
    model_root: str | None = None
    max_model_len: int | None = None
    process_start: float | None = None
    launch_args_digest: str | None = None
    problems: tuple[str, ...] = ()  # inside the bundle: two versions, a restart

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "problems": list(self.problems)}

    def known(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}


async def ask_identity(ctx: CheckContext) -> CheckContext:
    """`/version` and `/v1/models` at a section's start, saved in `requests/identity.jsonl`,
    and one `/metrics` scrape (`metrics/identity.prom`: the engine's process start time, so
    a section that scrapes nothing else, env, still names the process it measured); the
    served model is then known to every family (no second ask). Behind a gateway the
    engine's own `/v1/models` too (`requests/engine-identity.jsonl`): the context returned
    asks the engine under its name for the model (`engine_name`); and whether the gateway
    passes vLLM's prompt fields on (`gateway_takes_prompt_fields`)."""
    ctx.save(await ctx.target.get("/version", "version"), IDENTITY_FILE)
    parsed = ctx.save(await ctx.target.get("/v1/models", "models"), IDENTITY_FILE)
    where = f"requests/{IDENTITY_FILE}.jsonl"
    ctx.facts.served = served_of(parsed, ctx.config.target.model, where)
    engine = ctx.engine  # behind a gateway (--engine-url): the engine's own process
    if engine is not None:
        listed = ctx.save(await engine.get("/v1/models", "engine-models"), ENGINE_IDENTITY)
        _, names = served_entry(listed.json_body, None)
        served = ctx.facts.served
        if served is not None and (name := engine_model_for(served.model, names)) != served.model:
            engine = EngineTwin(engine, name)
            ctx = dataclasses.replace(ctx, engine=engine)
        if served is not None:
            ctx.facts.gateway_asks = await gateway_takes_prompt_fields(ctx, served.model)
    await scrape(
        ctx,
        IDENTITY_FILE,
        engine or ctx.target,
        engine.url("/metrics") if engine is not None else ctx.metrics_url,
    )
    return ctx


async def gateway_takes_prompt_fields(ctx: CheckContext, model: str) -> bool:
    """Whether the gateway passes vLLM's prompt fields on (`ASK_PROMPT`). A strict gateway
    refuses request fields it does not know (HTTP 400 or 422), and then every request golive
    asks them on would fail for golive's sake, not the deployment's. One short request asks
    (`gateway-ask`); where it is refused and the same request without them is answered
    (`gateway-plain`), golive does not ask through this gateway, and its answers are held to
    the engine's by prompt-token count, which the checks say. Both saved with the identity."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "temperature": 0,
    }
    asked = ctx.save(await ctx.target.chat(asking_prompt(body), "gateway-ask"), IDENTITY_FILE)
    if asked.record.status not in (400, 422):
        return True
    plain = ctx.save(await ctx.target.chat(body, "gateway-plain"), IDENTITY_FILE)
    return not plain.record.ok


def launch_args_digest(evidence: BundleReader) -> str | None:
    """The serving launch's non-default arguments as one digest (None: no log)."""
    facts = serving_launch(evidence)
    if facts is None:
        return None
    args = dict(facts.non_default_args)
    blob = json.dumps(args, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def deployment_of(evidence: BundleReader, wanted: str | None) -> Deployment:
    """The deployment in `evidence` (its records, scrapes and startup log)."""
    versions: set[str] = set()
    served: set[tuple[str, str | None, int | None]] = set()
    for path in record_streams(evidence.root):
        if path.name.startswith(ENGINE_IDENTITY + "."):
            continue  # the engine behind a gateway lists the model under its own name
        for record in stream_records(evidence.root, path):
            if not record.ok:
                continue
            url, body = record.url, record.response
            if url.endswith("/version") and isinstance(body, Mapping):
                version = body.get("version")
                if isinstance(version, str):
                    versions.add(version)
            elif url.endswith("/v1/models"):
                entry, _ = served_entry(body, wanted)
                if entry is not None:
                    served.add(_served(entry))
    starts = _process_starts(evidence)
    problems = []
    if len(versions) > 1:
        problems.append(f"two vLLM versions answered: {', '.join(sorted(versions))}")
    if len(served) > 1:
        problems.append(f"the served model changed: {', '.join(str(s) for s in sorted(served))}")
    restart = evidence.json(RESTART)  # capacity's own restart after a death: recorded there
    restarted = isinstance(restart, Mapping) and restart.get("served_again") is True
    if len(starts) > 1 and not restarted:
        problems.append(
            "the engine restarted during the run (process start times "
            f"{', '.join(f'{s:.0f}' for s in sorted(starts))})"
        )
    model, root, max_len = sorted(served, key=str)[0] if served else (None, None, None)
    return Deployment(
        vllm_version=min(versions) if versions else None,
        model=model,
        model_root=root,
        max_model_len=max_len,
        process_start=min(starts) if starts else None,
        launch_args_digest=launch_args_digest(evidence),
        problems=tuple(problems),
    )


def _process_starts(evidence: BundleReader) -> set[float]:
    starts: set[float] = set()
    for path in sorted((evidence.root / "metrics").glob("*.prom")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in _PROCESS_START.finditer(text):
            try:
                starts.add(float(match.group(1)))
            except ValueError:
                continue
    return starts


def _served(entry: Mapping[str, Any]) -> tuple[str, str | None, int | None]:
    root, length = entry.get("root"), entry.get("max_model_len")
    return (
        str(entry.get("id")),
        root if isinstance(root, str) else None,
        length if isinstance(length, int) else None,
    )
