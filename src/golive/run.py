"""Recipes: open a bundle, run a programme of checks against a target, decide, seal.

Whatever happens inside a programme, the bundle ends with a verdict and a manifest: an
unexpected crash becomes a critical `integrity` error (outcome `hold`), never a lost run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive import __version__
from golive.bundle import Bundle
from golive.checks.context import CheckContext, NoTarget, Target
from golive.config import GoliveConfig, load_profile, profile_text
from golive.decide import decide, limits
from golive.errors import ConfigError
from golive.report.markdown import render_markdown
from golive.results import CheckClass, CheckResult, Decision, Outcome, Status
from golive.traffic.client import ClientSettings, TargetClient, read_api_key

Programme = Callable[[CheckContext], Awaitable[list[CheckResult]]]


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    bundle: Path
    data: dict[str, Any]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


async def judge(
    config: GoliveConfig,
    out: Path,
    command: str,
    programme: Programme,
    attach: Mapping[str, Path] | None = None,
    require_target: bool = True,
) -> Verdict:
    """Run `programme` against the configured target and write a sealed bundle.

    `attach` maps bundle paths to local files copied in before sealing (e.g. the local
    target's server log as `environment/startup.log`).
    """
    if config.target.url is None and require_target:
        raise ConfigError("no target: give --target URL (or target.url in the config file)")
    profile = load_profile(config.profile)
    api_key = read_api_key(config.target.api_key_env)
    bundle = Bundle.create(out, secrets=[api_key] if api_key else [])
    started = _now()
    bundle.write_text(
        "config/effective.yaml", yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    )
    bundle.write_text("config/profile.yaml", profile_text(config.profile))
    try:
        async with contextlib.AsyncExitStack() as stack:
            target: Target = NoTarget()
            engine: Target | None = None
            if config.target.url is not None:
                target = await stack.enter_async_context(TargetClient(_settings(config)))
            if config.target.engine_url is not None:
                engine = await stack.enter_async_context(
                    TargetClient(_settings(config, config.target.engine_url))
                )
            checks = await programme(CheckContext(target, bundle, config, profile, engine))
    except Exception as exc:
        checks = [
            CheckResult(
                "golive.internal",
                CheckClass.INTEGRITY,
                True,
                Status.ERROR,
                f"golive stopped early on an unexpected error: {type(exc).__name__}: {exc}",
            )
        ]
    for rel, source in (attach or {}).items():
        bundle.write_text(rel, source.read_text(encoding="utf-8", errors="replace"))
    decision = decide(checks)
    data = verdict_json(config, profile.name, command, started, checks, decision)
    bundle.write_json("verdict.json", data)
    chain = bundle.path("environment/chain.json")
    chain_data = json.loads(chain.read_text()) if chain.exists() else None
    bundle.write_text("report.md", render_markdown(data, chain_data))
    bundle.seal()
    return Verdict(decision.outcome, out, data)


def _settings(config: GoliveConfig, url: str | None = None) -> ClientSettings:
    base = url or config.target.url
    assert base is not None
    return ClientSettings(
        base_url=base,
        api_key_env=config.target.api_key_env,
        connect_timeout_s=config.target.connect_timeout_s,
        read_timeout_s=config.target.read_timeout_s,
    )


def verdict_json(
    config: GoliveConfig,
    profile: str,
    command: str,
    started: str,
    checks: Sequence[CheckResult],
    decision: Decision,
) -> dict[str, Any]:
    """verdict.json as DESIGN.md §1 defines it."""
    failed = [c for c in checks if c.status in (Status.FAIL, Status.ERROR, Status.NO_DATA)]
    return {
        "outcome": decision.outcome.value,
        "exit_code": decision.outcome.exit_code,
        "profile": profile,
        "target": config.target.url,
        "command": command,
        "started_at": started,
        "finished_at": _now(),
        "golive_version": __version__,
        "config_digest": "sha256:"
        + hashlib.sha256(
            yaml.safe_dump(config.model_dump(mode="json"), sort_keys=True).encode()
        ).hexdigest(),
        "checks": [c.to_json() for c in checks],
        "rules_fired": [r.to_json() for r in decision.rules_fired],
        "limits": limits(checks),
        "actions": [
            {
                "check": c.id,
                "owner": "unassigned",
                "deadline": "unassigned",
                "rollback": "unassigned",
            }
            for c in failed
        ],
        "rollback_target": None,
    }
