"""Flags that set config keys. A flag that sets a setting is declared as (flag, key); its
type, help and default come from the config model, so the two cannot drift
(tests/unit/test_cli_flags.py). `config_overrides` reads back what a command's flags set."""

from __future__ import annotations

import argparse
import os
import sys
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golive.config import GoliveConfig
from golive.config_sources import (
    config_field,
    config_path,
    env_overrides,
    load_config,
    plain_annotation,
)


@dataclass(frozen=True, slots=True)
class ConfigFlag:
    """A flag that sets one config key (None leaves the config file's value)."""

    flag: str
    key: str
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


TARGET_FLAGS = (
    ConfigFlag("--target", "target.url", "URL"),
    ConfigFlag("--metrics-url", "target.metrics_url", "URL"),
    ConfigFlag("--api-key-env", "target.api_key_env", "NAME"),
    ConfigFlag("--model", "target.model"),
    ConfigFlag("--engine-url", "target.engine_url", "URL"),
    ConfigFlag("--profile", "profile"),
    ConfigFlag("--not-k3", "not_k3", "REASON"),
    ConfigFlag("--policy", "policy", "FILE"),
    ConfigFlag("--sign-key", "sign_key", "PEM"),
)
CAPACITY_FLAGS = (
    ConfigFlag("--concurrency", "capacity.concurrency", "N"),
    ConfigFlag("--required-concurrency", "capacity.required_concurrency", "N"),
    ConfigFlag("--required-context", "capacity.required_context", "TOKENS"),
    ConfigFlag("--max-context", "capacity.max_context", "TOKENS"),
    ConfigFlag("--duration", "capacity.duration_s", "S"),
    ConfigFlag("--min-sustained", "capacity.min_sustained_s", "S"),
    ConfigFlag("--min-completions", "capacity.min_sustained_completions", "N"),
    ConfigFlag("--step-duration", "capacity.step_duration_s", "S"),
    ConfigFlag("--restart-wait", "capacity.restart_wait_s", "S"),
    ConfigFlag("--prometheus-url", "capacity.prometheus_url", "URL"),
    ConfigFlag("--dcgm-selector", "capacity.dcgm_selector", "LABELS"),
)
CACHE_FLAGS = (
    ConfigFlag("--prefix-tokens", "cache.prefix_tokens", "TOKENS"),
    ConfigFlag("--warm-repeats", "cache.warm_repeats", "N"),
    ConfigFlag("--cold-samples", "cache.cold_samples", "N"),
)
AGENT_FLAGS = (
    ConfigFlag("--repeat", "agent.repeat", "N"),
    ConfigFlag("--schemas", "agent.schemas_file", "FILE"),
    ConfigFlag("--case", "agent.cases", "NAME"),
    ConfigFlag("--temperature", "agent.temperature"),
)
WATCH_FLAGS = (
    ConfigFlag("--duration", "watch.duration_s", "S"),
    ConfigFlag("--interval", "watch.interval_s", "S"),
    ConfigFlag("--probe-deadline", "watch.probe_deadline_s", "S"),
    ConfigFlag("--tool-every", "watch.tool_every", "N"),
    ConfigFlag("--cache-every", "watch.cache_every", "N"),
    ConfigFlag("--repeated", "watch.repeated", "N"),
    ConfigFlag("--missing-limit", "watch.missing_limit", "N"),
    ConfigFlag("--on-rollback", "watch.on_rollback", "CMD"),
    ConfigFlag("--cooldown", "watch.cooldown_s", "S"),
    ConfigFlag("--critical-probe", "watch.critical_probe", "CASE"),
    ConfigFlag("--max-5xx-share", "watch.max_5xx_share", "F"),
)


def _scalar(annotation: object) -> tuple[Any, bool]:
    """(argparse type, repeatable) of a field's annotation: Optional unwrapped, a tuple of
    strings repeatable, a Literal given as choices by the caller."""
    annotation = plain_annotation(annotation)
    if typing.get_origin(annotation) is tuple:
        return typing.get_args(annotation)[0], True
    return annotation, False


def add_config_flags(parser: argparse.ArgumentParser, flags: Sequence[ConfigFlag]) -> None:
    """Add each flag with the type, help and default its config key has; remember which
    flags this command has, for `config_overrides`."""
    for flag in flags:
        field = config_field(flag.key)
        kind, repeatable = _scalar(field.annotation)
        default = field.get_default(call_default_factory=True)
        shown = "" if default is None or default == () else f"; default {default}"
        options: dict[str, Any] = {
            "dest": flag.dest,
            "metavar": flag.metavar,
            # argparse formats help with %: a description's own "%" must stay a character
            "help": f"{field.description or flag.key} (config {flag.key}{shown})".replace(
                "%", "%%"
            ),
        }
        if typing.get_origin(kind) is typing.Literal:
            options["choices"] = typing.get_args(kind)
        elif repeatable:
            options.update(action="append", type=kind)
        else:
            options["type"] = kind
        parser.add_argument(flag.flag, **options)
    known = parser.get_default("config_flags") or ()
    parser.set_defaults(config_flags=(*known, *flags))


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys this command's flags set: dotted key -> value (None: not given)."""
    return {flag.key: getattr(args, flag.dest) for flag in getattr(args, "config_flags", ())}


def command_config(
    args: argparse.Namespace,
    announce: bool = True,
    overrides: Mapping[str, object] | None = None,
) -> GoliveConfig:
    """The config a command runs with, the one place a command loads it: defaults ←
    `--config` (else `$GOLIVE_CONFIG`) ← `GOLIVE_*` variables ← this command's flags (and
    `overrides`, from flags that are not config flags; None: not given). `announce`: say on
    stderr which file and which variables it came from (a variable left in a shell must not
    change a run unseen)."""
    given = getattr(args, "config", None)
    path = config_path(given, os.environ)
    config = load_config(path, {**config_overrides(args), **(overrides or {})}, os.environ)
    if announce:
        if path is not None and given is None:
            print(f"config: {path} (from $GOLIVE_CONFIG)", file=sys.stderr)
        for key, (variable, _) in sorted(env_overrides(os.environ).items()):
            print(f"config: {key} from {variable}", file=sys.stderr)
    return config
