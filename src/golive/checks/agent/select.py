"""Which Agent cases run, and how critical each is: the user's own tool schemas
(`--schemas FILE`, untrusted input validated at the edge) next to the shipped set, and the
config's `agent.cases` / `agent.critical` / `agent.non_critical`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from golive.checks.agent.cases import AgentCase, named, shipped_cases, system_prompt
from golive.checks.agent.rules import Expect
from golive.config import AgentConfig
from golive.errors import ConfigError
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig


def cases_for(
    config: AgentConfig, profile: Profile, programme: ProgrammeConfig | None = None
) -> tuple[AgentCase, ...]:
    """The shipped cases plus the user's, selected and with criticality applied (the
    config's, and the cases the profile makes critical, which the config may not lower);
    `programme.not_used` may name only cases there are, and none the profile makes critical."""
    forced = profile.agent.critical_cases
    every = known_cases(config)
    known = {c.name for c in every}
    for unused in programme.not_used if programme is not None else ():
        name = unused.part.removeprefix("agent.")
        if unused.part.startswith("agent.") and name not in known:
            raise ConfigError(
                f"programme.not_used: {unused.part} is not an Agent case (there are: "
                f"{', '.join(sorted(known))})"
            )
        if name in forced:
            raise ConfigError(
                f"programme.not_used: {unused.part} is critical under the {profile.name} "
                "profile (the deployment's main Agent path): it must run; remove it"
            )
    lowered = [n for n in config.non_critical if n in forced]
    if lowered:
        raise ConfigError(
            f"agent.non_critical: {', '.join(lowered)} is critical under the {profile.name} "
            "profile (the deployment's main Agent path); remove it from agent.non_critical"
        )
    return select(every, config.cases, *_criticality_lists(config, profile))


def known_cases(config: AgentConfig) -> tuple[AgentCase, ...]:
    """Every case there is to run: the shipped ones and one per tool of the user's file."""
    cases = shipped_cases()
    if config.schemas_file:
        cases += load_user_cases(Path(config.schemas_file))
    return cases


def _criticality_lists(
    config: AgentConfig, profile: Profile
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(critical, non-critical) case names: the config's, with the cases the profile makes
    critical never among the non-critical."""
    forced = profile.agent.critical_cases
    return (*config.critical, *forced), tuple(n for n in config.non_critical if n not in forced)


def due_criticality(case: AgentCase, config: AgentConfig, profile: Profile) -> AgentCase:
    """A planned case as golive defines it, with the criticality the config and profile give
    it, whatever the plan the bundle carries says: a shipped case is the shipped definition
    (request, expectation, criticality), a user's schema case the plan's (its schema file is
    not in the bundle)."""
    shipped = {c.name: c for c in shipped_cases()}
    return _criticality(shipped.get(case.name, case), *_criticality_lists(config, profile))


class _Function(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    description: str = ""
    parameters: dict[str, Any]
    strict: bool | None = None


class _UserTool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str = Field("function", pattern="^function$")
    function: _Function
    prompt: str | None = Field(None, description="a user message that should lead to this call")
    critical: bool = True


class _SchemasFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tools: list[_UserTool] = Field(min_length=1)


def load_user_cases(path: Path) -> tuple[AgentCase, ...]:
    """One named-call case per tool in the user's file (YAML or JSON)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check --schemas") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: neither JSON nor YAML: {exc}") from exc
    try:
        parsed = _SchemasFile.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigError(
            f"{path}: not a tool schema file ({where}); expected `tools:` as a list of "
            '{"type": "function", "function": {"name", "description", "parameters"}}'
        ) from exc
    _check_schemas(path, parsed)
    cases = []
    for entry in parsed.tools:
        spec = entry.function.model_dump(exclude_none=True)
        name = spec["name"]
        prompt = entry.prompt or (
            f"Call the tool {name} with realistic arguments for a typical request. "
            f"Its purpose: {entry.function.description or name}."
        )
        cases.append(
            AgentCase(
                f"schema.{name}",
                f"your tool {name}: a named call whose arguments satisfy your schema",
                Expect.CALL,
                (
                    {"role": "system", "content": system_prompt()},
                    {"role": "user", "content": prompt},
                ),
                ({"type": "function", "function": spec},),
                named(name),
                critical=entry.critical,
                feature=f"the tool {name}",
            )
        )
    return tuple(cases)


def _check_schemas(path: Path, parsed: _SchemasFile) -> None:
    names = [t.function.name for t in parsed.tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}: tool names repeat: {', '.join(dupes)}; names must be unique")
    for index, entry in enumerate(parsed.tools):
        try:
            jsonschema.Draft202012Validator.check_schema(entry.function.parameters)
        except jsonschema.SchemaError as exc:
            raise ConfigError(
                f"{path}: tools.{index}.function.parameters ({entry.function.name}) is not a "
                f"valid JSON Schema: {exc.message}"
            ) from exc


def select(
    cases: Sequence[AgentCase],
    names: Sequence[str] | None,
    critical: Sequence[str],
    non_critical: Sequence[str],
) -> tuple[AgentCase, ...]:
    """The cases to run, with the config's criticality applied; unknown names are errors."""
    known = {c.name for c in cases}
    for label, listed in (
        ("agent.cases", names or ()),
        ("agent.critical", critical),
        ("agent.non_critical", non_critical),
    ):
        unknown = [n for n in listed if n not in known]
        if unknown:
            raise ConfigError(
                f"{label}: unknown case(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
    chosen = [c for c in cases if names is None or c.name in names]
    return tuple(_criticality(c, critical, non_critical) for c in chosen)


def _criticality(
    case: AgentCase, critical: Sequence[str], non_critical: Sequence[str]
) -> AgentCase:
    if case.name in critical:
        return replace(case, critical=True)
    if case.name in non_critical:
        return replace(case, critical=False, feature=case.feature or case.name)
    return case
