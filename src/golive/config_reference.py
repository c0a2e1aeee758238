"""The config's own documentation, written from the config model so it cannot drift from it:
`golive init` writes a commented `golive.yaml` holding every key at its default, and
docs/config.md is the key reference (`golive config reference`; a test keeps the file
current). Pure: text in, text out."""

from __future__ import annotations

import json
import textwrap
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from golive.config import GoliveConfig
from golive.config_sources import RESERVED, VARIABLES, plain_annotation, variable_of
from golive.profiles import load_profile
from golive.programme_config import ProgrammeConfig

SECTION_HELP = {
    "target": "the deployment under test; url is required (here, --target or GOLIVE_TARGET_URL)",
    "client": "the production client's timeout and retries, used in every load window",
    "smoke": "post-start request classes",
    "environment": "what the deployment is meant to be (image, parallel layout, GPUs)",
    "capacity": "the four pressure phases: ramp, long input, sustained, answers under load",
    "cache": "the prefix-cache proof",
    "agent": "the Agent API contract suite",
    "watch": "the post-approval watch window",
    "signoff": "owners of failed items, trusted signing keys",
    "records": "what the bundle keeps of the load phases' request bodies",
    "slo": "latency and error targets: the SLO ceiling and goodput of every ramp step",
    "programme": "parts of the programme the application does not use",
}


# top-level keys a new run always has whatever the model's default (load_config)
_RUN_DEFAULTS: dict[str, Any] = {"programme": ProgrammeConfig()}
_WIDTH = 96


@dataclass(frozen=True, slots=True)
class KeyDoc:
    """One config key as the reference shows it."""

    key: str  # dotted
    kind: str
    default: Any
    meaning: str
    variable: str | None  # its GOLIVE_* variable (None: file only)


def _model(annotation: Any) -> type[BaseModel] | None:
    kind = plain_annotation(annotation)
    if typing.get_origin(kind) is tuple:
        kind = typing.get_args(kind)[0]
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _kind(field: FieldInfo) -> str:
    """The field's type as a reader writes it: `int`, `float or none`, `list of int`."""
    kind = plain_annotation(field.annotation)
    optional = kind is not field.annotation
    if typing.get_origin(kind) is typing.Literal:
        text = " | ".join(str(a) for a in typing.get_args(kind))
    elif typing.get_origin(kind) is tuple:
        inner = typing.get_args(kind)[0]
        text = f"list of {getattr(inner, '__name__', str(inner))}"
    else:
        text = getattr(kind, "__name__", str(kind))
    return f"{text} or none" if optional else text


def _meaning(field: FieldInfo) -> str:
    return " ".join((field.description or "").split())


def key_docs(model: type[BaseModel] = GoliveConfig, prefix: str = "") -> Iterator[KeyDoc]:
    """Every key of the config, in the model's order, with its default and meaning."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        inner = _model(field.annotation)
        default = (_RUN_DEFAULTS if not prefix else {}).get(
            name, field.get_default(call_default_factory=True)
        )
        if inner is not None and isinstance(default, BaseModel):
            yield from key_docs(inner, f"{key}.")
            continue
        if isinstance(default, BaseModel):
            default = default.model_dump(mode="json")
        variable = variable_of(key) if variable_of(key) in VARIABLES else None
        yield KeyDoc(key, _kind(field), _json_default(default), _meaning(field), variable)


def _json_default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _scalar_text(value: Any) -> str:
    """A value as YAML writes it on one line."""
    return (
        str(yaml.safe_dump(value, default_flow_style=True, width=10_000))
        .strip()
        .removesuffix("\n...")
    )


def init_yaml(profile: str = "generic") -> str:
    """A `golive.yaml` holding every key at its default (the profile's name set), each with its
    meaning as a comment; it loads to exactly the defaults, and a deleted line falls back to
    golive's default."""
    described = load_profile(profile).description
    lines = [
        "# golive.yaml, written by `golive init`: every key at its default, with its meaning.",
        "# Edit what your deployment differs in; delete a line to follow golive's default.",
        "# Flags override this file; GOLIVE_<SECTION>_<KEY> variables override it too",
        "# (GOLIVE_TARGET_URL sets target.url). Check it with `golive config validate FILE`;",
        "# every key: docs/config.md.",
        f"# profile {profile}: {described}",
        "",
    ]
    _model_lines(GoliveConfig, 0, lines, {**_RUN_DEFAULTS, "profile": profile})
    return "\n".join(lines) + "\n"


def _model_lines(
    model: type[BaseModel], depth: int, lines: list[str], values: dict[str, Any]
) -> None:
    pad = "  " * depth
    for name, field in model.model_fields.items():
        inner = _model(field.annotation)
        default = values.get(name, field.get_default(call_default_factory=True))
        meaning = SECTION_HELP.get(name) if depth == 0 and inner is not None else None
        meaning = meaning or _meaning(field)
        if meaning:
            wrap = textwrap.wrap(meaning, _WIDTH - len(pad) - 2)
            lines += [f"{pad}# {line}" for line in wrap]
        if inner is not None and isinstance(default, BaseModel):
            lines.append(f"{pad}{name}:")
            _model_lines(inner, depth + 1, lines, {})
            if depth == 0:
                lines.append("")
            continue
        if inner is not None:  # an optional structure, or a list of them: its keys shown
            keys = ", ".join(inner.model_fields)
            lines.append(f"{pad}# each: {{{keys}}}")
            default = None if default is None else list(default)
        lines.append(f"{pad}{name}: {_scalar_text(_json_default(default))}")
        if depth == 0:
            lines.append("")


def reference_markdown() -> str:
    """docs/config.md: every key, its type, default, variable and meaning, by section."""
    out = [
        "# Configuration keys",
        "",
        "Generated from golive's config model (`golive config reference > docs/config.md`; "
        "a test keeps it current). A value comes from, last one winning: the default, the "
        "YAML file (`--config`, else `$GOLIVE_CONFIG`), the key's `GOLIVE_*` variable (a "
        "list key takes comma-separated values), a flag. Unknown keys, and `GOLIVE_<SECTION>_…` "
        "variables that name no key, are errors. `golive init [--profile kimi-k3]` writes a "
        "file with every key at its default; `golive config validate FILE` checks one.",
        "",
        f"Variables golive reads that are not keys: {', '.join(f'`{v}`' for v in RESERVED)}.",
    ]
    section = None
    for doc in key_docs():
        head = doc.key.split(".")[0] if "." in doc.key else ""
        if head != section:
            section = head
            title = f"`{head}` — {SECTION_HELP[head]}" if head else "top level"
            out += ["", f"## {title}", "", "| key | type | default | variable | meaning |"]
            out.append("|---|---|---|---|---|")
        default = json.dumps(doc.default)
        variable = f"`{doc.variable}`" if doc.variable else "file only"
        meaning = doc.meaning.replace("|", "\\|") or "—"
        out.append(f"| `{doc.key}` | {doc.kind} | `{default}` | {variable} | {meaning} |")
    return "\n".join(out) + "\n"
