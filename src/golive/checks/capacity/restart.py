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
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import CapacityRun
from golive.checks.context import served_of
from golive.checks.deployment import IDENTITY_FILE
from golive.errors import LocalTargetError
from golive.evidence.gpu_curve import PhaseSpan

POLL_S = 2.0  # /health while waiting for the platform's restart
RESTART_STREAM = "capacity-restart"  # requests/capacity-restart.jsonl: what served again


async def served_again(run: CapacityRun) -> bool:
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
        run.inputs.progress.phase("restart")
        try:
            pid = await relaunch()
        except (LocalTargetError, OSError) as exc:
            failure = f"the relaunch failed: {exc}"
    else:
        how = f"the platform restarted it (waited up to {config.restart_wait_s:g} s)"
        run.inputs.progress.phase("restart", config.restart_wait_s)
        if not await _healthy_within(run, config.restart_wait_s):
            failure = f"/health did not answer OK within {config.restart_wait_s:g} s"
    if not failure:
        failure = await _another_deployment(run)
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


async def _healthy_within(run: CapacityRun, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        health = await run.ctx.target.get("/health", "capacity-restart")
        if health.ok:
            return True
        await asyncio.sleep(POLL_S)
    return False


async def _another_deployment(run: CapacityRun) -> str:
    """What differs between the deployment that serves again and the one measured so far
    (its vLLM version, served model, max_model_len: `requests/identity.jsonl` at the start);
    empty when it is the same. The answers are saved (`requests/capacity-restart.jsonl`)."""
    ctx = run.ctx
    version = ctx.save(await ctx.target.get("/version", "restart-version"), RESTART_STREAM)
    models = ctx.save(await ctx.target.get("/v1/models", "restart-models"), RESTART_STREAM)
    now = served_of(models, ctx.config.target.model, f"requests/{RESTART_STREAM}.jsonl")
    said = version.json_body.get("version") if isinstance(version.json_body, dict) else None
    before = _version_at_start(BundleReader(ctx.bundle.root))
    changed = []
    if before is not None and said != before:
        changed.append(f"vLLM {said!r}, was {before!r}")
    was = ctx.facts.served
    if was is not None and (
        now is None or (now.model, now.max_model_len) != (was.model, was.max_model_len)
    ):
        shown = "nothing served" if now is None else f"{now.model} ({now.max_model_len} tokens)"
        changed.append(f"{shown}, was {was.model} ({was.max_model_len} tokens)")
    if not changed:
        return ""
    return "it served again as another deployment: " + "; ".join(changed)


def _version_at_start(evidence: BundleReader) -> str | None:
    for line in evidence.records(f"requests/{IDENTITY_FILE}.jsonl"):
        body = line.response
        if line.url.endswith("/version") and isinstance(body, dict):
            version = body.get("version")
            return version if isinstance(version, str) else None
    return None
