"""The model's name at the engine behind a gateway (`--engine-url`).

A gateway often serves the model under its own name (an alias such as `kimi`) and maps it to
the name the engine serves (`moonshotai/Kimi-K3`). The engine twin of each request must ask
the engine's name, or the engine refuses it (404) and nothing is held to the engine; and the
engine's metrics label its series with that name, so the served model's series are found
under it. The rule, applied at the run and again by `golive decide` from the engine's own
`/v1/models` answer (`requests/engine-identity.jsonl`): the gateway's name where the engine
lists it, else the engine's only model. An engine listing several models, none of them the
gateway's name, is asked the gateway's name (its twins then fail, and their checks say so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from golive.bundle.store import BundleReader
from golive.checks.context import Target, served_entry
from golive.traffic.records import RequestRecord

ENGINE_IDENTITY = "engine-identity"  # requests/engine-identity.jsonl: the engine's /v1/models


def engine_model_for(asked: str, listed: Sequence[str]) -> str:
    """The name the engine serves the model under (pure)."""
    if asked in listed or len(listed) != 1 or not listed[0]:
        return asked
    return listed[0]


def engine_model(evidence: BundleReader, asked: str | None) -> str | None:
    """`asked` as the engine names it, from the bundle's saved engine `/v1/models` answer
    (`asked` itself where there is none: no gateway, or a bundle sealed before the record)."""
    if asked is None:
        return None
    for line in evidence.records(f"requests/{ENGINE_IDENTITY}.jsonl"):
        body = line.response
        if line.url.endswith("/v1/models") and isinstance(body, Mapping):
            _, listed = served_entry(dict(body), None)
            return engine_model_for(asked, listed)
    return asked


class EngineTwin:
    """The engine behind the gateway, asked under its own name for the model: each chat
    body's `model` is rewritten to `name` (everything else goes as it is)."""

    def __init__(self, engine: Target, name: str) -> None:
        self.engine = engine
        self.name = name

    def url(self, path: str) -> str:
        return self.engine.url(path)

    def abort_in_flight(self, reason: str) -> int:
        return self.engine.abort_in_flight(reason)

    async def get(self, path: str, label: str) -> RequestRecord:
        return await self.engine.get(path, label)

    async def post(self, path: str, body: Mapping[str, Any], label: str) -> RequestRecord:
        return await self.engine.post(path, body, label)

    async def chat(
        self,
        body: Mapping[str, Any],
        label: str,
        scheduled_ns: int | None = None,
        deadline_s: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        return await self.engine.chat(
            {**body, "model": self.name}, label, scheduled_ns, deadline_s, headers
        )
