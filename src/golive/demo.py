"""`golive demo`: set up and start the bundled local vLLM (CPU), run golive, stop it."""

from __future__ import annotations

from pathlib import Path

from golive.checks.smoke import run_smoke
from golive.config import load_config
from golive.run import Verdict, judge
from golive.target.install import Progress, ensure_target
from golive.target.server import ServeOptions, running_target


async def run_demo(model: str, out: Path, progress: Progress) -> Verdict:
    paths = await ensure_target(model, progress)
    async with running_target(paths, ServeOptions(), paths.root / "runs", progress) as target:
        progress(f"target healthy at {target.url}; running golive smoke")
        config = load_config(None, {"target.url": target.url, "target.model": target.served_name})
        verdict = await judge(
            config, out, "demo", run_smoke, attach={"environment/startup.log": target.log_path}
        )
    progress("target stopped")
    return verdict
