"""Profiles: what a model family's deployment must show (chain, cache, capacity, Agent),
as data. Bundled: generic.yaml and kimi-k3.yaml; or a profile YAML file by path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import Field

from golive.config import StrictModel
from golive.errors import ConfigError
from golive.yaml_input import parse_yaml, read_yaml, validated

PROFILES = ("generic", "kimi-k3")


class ChainExpectation(StrictModel):
    image: str | None = None
    image_digest_required: bool = False
    min_vllm: str | None = None
    cuda_major: int | None = None
    min_driver_major: int | None = None
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    prefix_caching_required: bool = False
    min_gpus: int | None = None
    gpu_class: str | None = None  # every GPU's name contains it (e.g. "H200")
    gpus: int | None = None  # exactly this many GPUs in all


class CacheProfile(StrictModel):
    min_shared_prefix_tokens: int = Field(1024, ge=1)
    block_size_hint: int | None = None
    notes: str = ""


class CapacityProfile(StrictModel):
    # A wrong answer under load is a critical defect for this model (it blocks go-live).
    answers_under_load_critical: bool = False


class AgentProfile(StrictModel):
    reasoning_fields: tuple[str, ...] = ("reasoning", "reasoning_content")
    # cases critical under this profile whatever the config says (agent.non_critical may not
    # name them): the model's main Agent path
    critical_cases: tuple[str, ...] = ()
    forbidden_content_markers: tuple[str, ...] = ()


class Profile(StrictModel):
    name: str
    description: str
    chain: ChainExpectation = ChainExpectation()
    cache: CacheProfile = CacheProfile()
    capacity: CapacityProfile = CapacityProfile()
    agent: AgentProfile = AgentProfile()


def load_profile(name_or_path: str) -> Profile:
    """A bundled profile by name, or a profile YAML file by path."""
    if name_or_path in PROFILES:
        text = resources.files("golive.profiles").joinpath(f"{name_or_path}.yaml").read_text()
        return validated(Profile, parse_yaml(text, f"profile {name_or_path}"), name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            f"profile {name_or_path!r} is neither a bundled profile ({', '.join(PROFILES)}) "
            "nor a readable YAML file"
        )
    profile = validated(Profile, read_yaml(path), str(path))
    if profile.name in PROFILES and path.read_text() != profile_text(profile.name):
        # golive decide judges a copy naming a bundled profile as the bundled one
        raise ConfigError(
            f"--profile {path}: it calls itself {profile.name!r}, a bundled profile, but differs "
            "from it; give your profile its own name"
        )
    return profile


def parse_profile(text: str, source: str) -> Profile:
    """A profile from its YAML text (the copy a bundle keeps in config/profile.yaml)."""
    return validated(Profile, parse_yaml(text, source), source)


def profile_text(name_or_path: str) -> str:
    """The profile's source text, saved into the bundle as evidence of the rules applied."""
    if name_or_path in PROFILES:
        return resources.files("golive.profiles").joinpath(f"{name_or_path}.yaml").read_text()
    return Path(name_or_path).read_text()
