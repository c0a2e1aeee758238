"""`--ray ADDRESS` on `capacity`, `agent` and `run`: the client actors for one command.

Ray is imported only when the flag is given (`golive[ray]`); the actors are released when
the command ends, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from golive.config import GoliveConfig
from golive.evidence.ray_env import require_ray
from golive.pipeline import client_settings

if TYPE_CHECKING:
    from golive.traffic.ray_load import RayLoad


@contextlib.asynccontextmanager
async def ray_clients(
    address: str | None, config: GoliveConfig, progress: Callable[[str], None]
) -> AsyncIterator[RayLoad | None]:
    if address is None:
        yield None
        return
    require_ray()
    from golive.traffic.ray_load import RayLoad

    load = await asyncio.to_thread(RayLoad, address, client_settings(config))
    progress(f"ray: load from {len(load.actors)} client(s): {', '.join(load.names)}")
    try:
        yield load
    finally:
        load.close()


def judge_options(load: RayLoad | None) -> dict[str, Any]:
    """What `judge` needs to send chat requests from the actors and count them."""
    if load is None:
        return {}
    return {"remote": (load,), "route": load.target}
