"""`golive demo`: set up and start the bundled local vLLM (CPU), run golive, stop it.

The demo judges what golive can prove on this machine: the version chain from the server's
own startup log, the live API and the engine venv (probed like a serving container), then
the post-start smoke checks. There is no GPU here, so host evidence is `no_data`, which the
generic profile does not require.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from golive.checks.context import CheckContext
from golive.checks.env import EnvEvidence, run_env
from golive.checks.smoke import run_smoke
from golive.config import load_config
from golive.evidence.collect import collect_container
from golive.results import CheckResult
from golive.run import Verdict, judge
from golive.target.install import Progress, ensure_target
from golive.target.server import ServeOptions, running_target


async def run_demo(model: str, out: Path, progress: Progress) -> Verdict:
    paths = await ensure_target(model, progress)
    async with running_target(paths, ServeOptions(), paths.root / "runs", progress) as target:
        progress(f"target healthy at {target.url}; running golive env + smoke")
        container = await asyncio.to_thread(collect_container, str(paths.python))
        evidence = EnvEvidence(
            log_text=target.log_path.read_text(errors="replace"),
            container=container.model_copy(update={"serve_command": target.argv}),
        )

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return [*await run_env(ctx, evidence), *await run_smoke(ctx)]

        config = load_config(
            None,
            {
                "target.url": target.url,
                "target.model": target.served_name,
                # One CPU core decodes ~5 tokens/s: keep the request classes small.
                "smoke.long_context_fraction": 0.25,
                "smoke.concurrent_sessions": 2,
                "smoke.sustained_s": 10,
            },
        )
        verdict = await judge(config, out, "demo", programme)
    progress("target stopped")
    return verdict
