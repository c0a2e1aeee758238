"""Where a run's config comes from: defaults ← the YAML file ← `GOLIVE_*` environment
variables ← flags. The result is validated as one config (unknown keys are errors), and an
error names the file, variable or flag, the field and the fix.

Every scalar key has a variable: `GOLIVE_` and the dotted key in upper case with `_` for the
dots (`target.url` → `GOLIVE_TARGET_URL`, `capacity.duration_s` → `GOLIVE_CAPACITY_DURATION_S`);
a list key takes comma-separated values. A `GOLIVE_*` variable that names no key but looks
meant as one (a misspelt key, a flag's name without its section, a file-only structure) is
refused: left unread it would leave a gate at its default. golive's own (`RESERVED`, the
rollback hook's) and any whose name says it holds a secret are left alone.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from golive.config import GoliveConfig
from golive.errors import ConfigError
from golive.yaml_input import read_yaml, validated

ENV_PREFIX = "GOLIVE_"
CONFIG_FILE_VARIABLE = "GOLIVE_CONFIG"  # the config file, when --config is not given
# variables golive reads that are not config keys (the local target's cache and Python)
RESERVED = ("GOLIVE_CONFIG", "GOLIVE_REGISTRY", "GOLIVE_TARGET_CACHE", "GOLIVE_TARGET_PYTHON")
# variables golive sets for an --on-rollback command, and the GPU test tier's own
_NOT_KEYS = ("GOLIVE_TRIGGER", "GOLIVE_ROLLBACK_", "GOLIVE_GPU_")
# a variable naming a secret is never refused nor suggested a key (it may hold an API key)
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def plain_annotation(annotation: Any) -> Any:
    """The annotation without `| None`."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else annotation
    return annotation


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, bool]]:
    """Every dotted key, and whether only the file can set it. The sections a config always
    has are walked; an optional structure (`environment.parallel`) or a list of structures
    (`signoff.actions`) is one file-only key; everything else is a value (or list of values)
    a variable sets."""
    for name, field in model.model_fields.items():
        kind = plain_annotation(field.annotation)
        if _is_model(kind) and (field.is_required() or field.default is not None):
            yield from _leaves(kind, f"{prefix}{name}.")
        elif _is_model(kind) or (
            typing.get_origin(kind) is tuple and _is_model(typing.get_args(kind)[0])
        ):
            yield f"{prefix}{name}", True
        else:
            yield f"{prefix}{name}", False


def scalar_keys() -> Iterator[str]:
    """Every dotted key a single value (or a list of values) sets: each has a variable."""
    return (key for key, file_only in _leaves(GoliveConfig) if not file_only)


def config_field(key: str) -> FieldInfo:
    """The config model's field behind a dotted key (KeyError: no such key)."""
    model: type[BaseModel] = GoliveConfig
    *parents, leaf = key.split(".")
    for part in parents:
        annotation = model.model_fields[part].annotation
        if not _is_model(annotation):
            raise KeyError(f"{key}: {part} is not a section of the config")
        model = annotation
    return model.model_fields[leaf]


def variable_of(key: str) -> str:
    """The environment variable that sets a dotted key."""
    return ENV_PREFIX + key.upper().replace(".", "_")


VARIABLES: dict[str, str] = {variable_of(key): key for key in scalar_keys()}
_FILE_ONLY = tuple(key for key, file_only in _leaves(GoliveConfig) if file_only)
_SECTIONS = tuple(
    ENV_PREFIX + name.upper() + "_"
    for name, field in GoliveConfig.model_fields.items()
    if _is_model(plain_annotation(field.annotation))
)


def env_overrides(environ: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """The keys `GOLIVE_*` variables set: dotted key -> (variable, value). An empty variable
    sets nothing; a list key's value is split on commas."""
    found: dict[str, tuple[str, Any]] = {}
    for variable, raw in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX) or variable in RESERVED or not raw.strip():
            continue
        key = VARIABLES.get(variable)
        if key is None:
            structure = next((k for k in _FILE_ONLY if variable.startswith(variable_of(k))), None)
            if structure is not None:
                raise ConfigError(
                    f"environment variable {variable}: {structure} is set in the config file "
                    "only (it is a structure, not one value); unset the variable"
                )
            near = _meant(variable)
            if near is not None:
                raise ConfigError(
                    f"environment variable {variable} names no config key; did you mean "
                    f"{near}? (unset it, or see docs/config.md for the variables golive reads)"
                )
            continue
        value: Any = raw
        if typing.get_origin(plain_annotation(config_field(key).annotation)) is tuple:
            value = [part.strip() for part in raw.split(",") if part.strip()]
        found[key] = (variable, value)
    return found


def _meant(variable: str) -> str | None:
    """The key variable an unknown GOLIVE_* variable was most likely meant as (None: it is
    not one: golive's own, a secret's, or unlike every key). A misspelt section or key
    (GOLIVE_CAPACITY_CONCURENCY, GOLIVE_PROFLE) and a flag's name without its section
    (GOLIVE_REQUIRED_CONCURRENCY, GOLIVE_DURATION) are refused: left unread, each would leave
    a gate at its default."""
    if variable.startswith(_NOT_KEYS) or any(w in variable for w in _SECRET_WORDS):
        return None
    leaf = variable.removeprefix(ENV_PREFIX).lower()
    same_leaf = [
        v
        for v, key in VARIABLES.items()
        if leaf in (key.split(".")[-1], key.split(".")[-1].rsplit("_", 1)[0])
    ]
    if same_leaf:
        return " or ".join(sorted(same_leaf))
    close = difflib.get_close_matches(variable, VARIABLES, n=1, cutoff=0.85)
    if close:
        return close[0]
    if variable.startswith(_SECTIONS):
        close = difflib.get_close_matches(variable, VARIABLES, n=1)
        return close[0] if close else "a GOLIVE_<SECTION>_<KEY> variable"
    return None


def config_path(path: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The config file: `--config`, else `$GOLIVE_CONFIG`, else none."""
    if path is not None:
        return path
    named = environ.get(CONFIG_FILE_VARIABLE)
    return Path(named) if named else None


def load_config(
    path: Path | None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> GoliveConfig:
    """Defaults ← YAML file ← `GOLIVE_*` variables in `environ` ← dotted flag overrides
    (`{"target.url": ...}`, None: the flag was not given); validated as one config."""
    data: dict[str, Any] = read_yaml(path) if path is not None else {}
    from_env = env_overrides(environ or {})
    layers = [
        {key: value for key, (_, value) in from_env.items()},
        {key: value for key, value in (overrides or {}).items() if value is not None},
    ]
    for layer in layers:
        for dotted, value in layer.items():
            node = data
            *parents, leaf = dotted.split(".")
            for key in parents:
                child = node.setdefault(key, {})
                if not isinstance(child, dict):
                    raise ConfigError(
                        f"{path}: {'.'.join(parents)} must be a mapping, not {child!r}"
                    )
                node = child
            node[leaf] = value
    if "programme" in data and data["programme"] is None:
        raise ConfigError(
            f"{path or 'command line'}: programme is empty; leave it out, or list the parts "
            "the application does not use under programme.not_used"
        )
    data.setdefault("programme", {})
    sources = [str(path)] if path else []
    sources += [variable for variable, _ in from_env.values()]
    return validated(GoliveConfig, data, " + ".join(sources) or "command line")
