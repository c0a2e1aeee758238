"""`--ray ADDRESS` and `--workers N` on `capacity` and `run` (`--ray` on `agent` too): the load
clients for one command, released when it ends, whatever happened.

Ray is imported only when `--ray` is given (`golive[ray]`). `--workers` is for one machine:
the two do not combine (with Ray, each node's client is one process; add nodes instead).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from golive.checks.context import body_sample
from golive.config import GoliveConfig
from golive.errors import ConfigError
from golive.evidence.ray_env import require_ray
from golive.orchestration.pipeline import client_settings
from golive.traffic.process_load import ProcessLoad, worker_count
from golive.traffic.retry import RetryPolicy

if TYPE_CHECKING:
    from golive.traffic.ray_load import RayLoad


@contextlib.asynccontextmanager
async def load_clients(
    address: str | None,
    workers: str | None,
    config: GoliveConfig,
    progress: Callable[[str], None],
) -> AsyncIterator[RayLoad | ProcessLoad | None]:
    count = 1 if workers is None else worker_count(workers)
    if address is not None and count > 1:
        raise ConfigError(
            f"--ray and --workers {workers} do not combine: with --ray every node sends "
            "from one client; give one of them"
        )
    if address is not None:
        async with _ray(address, config, progress) as load:
            yield load
        return
    if count == 1:  # one process: the engine runs in golive's own loop
        yield None
        return
    processes = await asyncio.to_thread(
        ProcessLoad,
        client_settings(config),
        count,
        body_sample(config),
        retry=RetryPolicy.of(config.client),
    )
    progress(f"workers: load from {count} processes")
    try:
        yield processes
    finally:
        await asyncio.to_thread(processes.close)


@contextlib.asynccontextmanager
async def _ray(
    address: str, config: GoliveConfig, progress: Callable[[str], None]
) -> AsyncIterator[RayLoad]:
    require_ray()
    from golive.traffic.ray_load import RayLoad

    load = await asyncio.to_thread(
        RayLoad, address, client_settings(config), RetryPolicy.of(config.client)
    )
    progress(f"ray: load from {len(load.actors)} client(s): {', '.join(load.names)}")
    try:
        yield load
    finally:
        load.close()
