"""A user's YAML (config, profile) read into a validated pydantic model: every error names
the file, the field and the fix (an unknown key lists the keys allowed there)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from golive.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror}); check the --config path"
        ) from exc
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys, not {type(data).__name__}"
        )
    return data


# fields whose wrong value may be a secret pasted in the wrong place: never echoed in an error
SECRET_FIELDS = ("api_key_env",)


def validated(model: type[M], data: Mapping[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(explain(exc, model, source)) from exc


def explain(exc: ValidationError, model: type[BaseModel], source: str) -> str:
    lines = [f"{source}: {exc.error_count()} invalid setting(s)"]
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            allowed = allowed_keys(model, error["loc"][:-1])
            fix = f"unknown key; remove it or use one of: {', '.join(allowed)}"
        else:
            fix = error["msg"]
            if not str(where).endswith(SECRET_FIELDS):  # a pasted key is never printed back
                fix += f" (got {error.get('input')!r})"
        lines.append(f"  {where}: {fix}")
    return "\n".join(lines)


def allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    current: Any = model
    for part in loc:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = field.annotation
    return sorted(getattr(current, "model_fields", {}))
