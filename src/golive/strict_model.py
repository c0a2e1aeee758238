"""The base of every model read from a user's file (config, profile, policy)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Frozen, and rejects unknown keys (a typo must not silently relax a gate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
