"""`golive init` and `golive config validate|reference`: find and check a config before any
run. Offline; they print and write only what they are asked to."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from rich.markup import escape

from golive.checks.agent.select import cases_for
from golive.cli.config_flags import command_config
from golive.cli.console import err
from golive.config_reference import init_yaml, reference_markdown
from golive.config_sources import config_path, env_overrides
from golive.errors import ConfigError
from golive.orchestration.pipeline import run_inputs
from golive.profiles import load_profile


def init(args: argparse.Namespace) -> int:
    """Write a config file holding every key at its default."""
    output: Path = args.output
    profile: str = args.profile
    load_profile(profile)  # a profile path that cannot be read is refused before writing
    if output.exists() and not args.force:
        raise ConfigError(f"{output} exists; give another -o FILE, or --force to replace it")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(init_yaml(profile), encoding="utf-8")
    err.print(
        f"wrote {escape(str(output))}: every key at its default (profile {escape(profile)}); "
        f"set target.url, then `golive config validate {escape(str(output))}`",
        highlight=False,
    )
    return 0


def config(args: argparse.Namespace) -> int:
    """`config validate FILE`, `config reference`."""
    return CONFIG_ACTIONS[args.config_command](args)


def _reference(args: argparse.Namespace) -> int:
    print(reference_markdown(), end="")
    return 0


def _validate(args: argparse.Namespace) -> int:
    """Load the file as a run would (with the GOLIVE_* variables set now); say what it sets."""
    path = config_path(args.file, os.environ)
    if path is None:
        raise ConfigError("config validate: give FILE (or set GOLIVE_CONFIG)")
    config = command_config(argparse.Namespace(config=path), announce=False)
    # what a run reads before it sends anything: profile, policy, API key, signing key
    profile, _, _, _ = run_inputs(config)
    cases_for(config.agent, profile, config.programme)  # Agent case names, --schemas
    from_env = env_overrides(os.environ)
    err.print(f"{escape(str(path))}: valid", highlight=False)
    for key, (variable, _) in sorted(from_env.items()):
        err.print(f"  {key} from {variable}", highlight=False)
    target = config.target.url or "not set (give --target, or GOLIVE_TARGET_URL)"
    err.print(f"  profile {config.profile}; target {escape(target)}", highlight=False)
    return 0


CONFIG_ACTIONS: Mapping[str, Callable[[argparse.Namespace], int]] = {
    "validate": _validate,
    "reference": _reference,
}
