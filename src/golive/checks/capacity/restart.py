"""After the engine died above a stable ramp step: the deployment serves again, so the
sustained window still measures the ceiling the ramp found.

The checklist's capacity finding for a death is a limit at the last stable step unless the
death "continues after reasonable context and concurrency controls" — which only a
sustained window at that step can show. A dead engine cannot run it, so golive waits for the
deployment to come back: its own launch started again (`capacity --launch`), or the
platform's restart within `capacity.restart_wait_s`. `memory/restart.json` records how and
when; the termination record stays, and the ramp is judged on the death. With neither, the
sustained window is not run (no_data, hold) and says how to measure it.
"""

from __future__ import annotations

import asyncio
import time

from golive.bundle.layout import RESTART
from golive.checks.capacity.collect import Run
from golive.errors import LocalTargetError
from golive.evidence.gpu_curve import PhaseSpan

POLL_S = 2.0  # /health while waiting for the platform's restart


async def served_again(run: Run) -> bool:
    """Bring the deployment back after a death above a stable step (True: it serves, the
    death flag is cleared and the host memory sampler follows the new process)."""
    config = run.ctx.config.capacity
    relaunch = run.inputs.relaunch
    if run.concurrency_ceiling is None or (relaunch is None and config.restart_wait_s <= 0):
        return False
    run.phase = "restart"
    started = time.time()
    death = run.death
    pid: int | None = None
    failure = ""
    if relaunch is not None:
        how = "golive started its --launch command again"
        run.inputs.progress.phase("restart", 0.0)
        try:
            pid = await relaunch()
        except LocalTargetError as exc:
            failure = str(exc)
    else:
        how = f"the platform restarted it (waited up to {config.restart_wait_s:g} s)"
        run.inputs.progress.phase("restart", config.restart_wait_s)
        if not await _healthy_within(run, config.restart_wait_s):
            failure = f"/health did not answer OK within {config.restart_wait_s:g} s"
    record = {
        "after": death,
        "how": how,
        "served_again": not failure,
        "failure": failure or None,
        "pid": pid,
        "started_at": started,
        "serving_at": None if failure else time.time(),
        "waited_s": round(time.time() - started, 1),
    }
    run.ctx.bundle.write_json(RESTART, record)
    run.timeline.append(PhaseSpan("restart", started, time.time()))
    if failure:
        return False
    run.dead.clear()
    run.death = None
    if pid is not None:
        run.follow(pid)
    return True


async def _healthy_within(run: Run, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        health = await run.ctx.target.get("/health", "capacity-restart")
        if health.ok:
            return True
        await asyncio.sleep(POLL_S)
    return False
