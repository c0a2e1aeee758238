"""Configuration: pydantic models at the edge (profiles: `golive.profiles`; where the values
come from: `golive.config_sources`).

Unknown keys are errors (`extra="forbid"`): a misspelt threshold silently ignored would let
a deployment pass a gate nobody meant to relax. Every error names the file, the field and
the fix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator

from golive.capacity_config import CapacityConfig
from golive.env_names import is_env_name
from golive.errors import ConfigError
from golive.programme_config import ProgrammeConfig
from golive.slo_config import SloConfig
from golive.strict_model import StrictModel
from golive.yaml_input import parse_yaml, validated


class TargetConfig(StrictModel):
    url: str | None = Field(None, description="OpenAI-compatible base URL, e.g. http://host:8000")
    metrics_url: str | None = Field(
        None, description="defaults to <engine_url>/metrics behind a gateway, else <url>/metrics"
    )
    engine_url: str | None = Field(None, description="the engine behind a gateway given as url")
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    model: str | None = Field(None, description="served model name; default: the first listed")
    connect_timeout_s: float = Field(10.0, gt=0, description="seconds to open a connection")
    read_timeout_s: float = Field(
        300.0, gt=0, description="seconds without a byte, mid-answer, before a request is given up"
    )
    request_deadline_s: float = Field(
        900.0, gt=0, description="whole-request limit: a slow-drip answer is cut after this"
    )
    max_response_mb: float = Field(
        256.0, gt=0, description="largest answer kept; a bigger one is cut and recorded"
    )

    @field_validator("url", "metrics_url", "engine_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL; write it as http://HOST:PORT")
        return value.rstrip("/") if value else value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not is_env_name(value):
            raise ValueError(
                "give the NAME of an environment variable (letters, digits, _; at most 64), "
                "never the key; the value given is not shown"
            )
        return value


class ClientConfig(StrictModel):
    """The production client's timeout and retry policy: the concurrent phase's requests are
    sent with it, and its retries and timeouts are counted per window (a retry storm,
    `capacity.max_retry_share`, makes a window unstable)."""

    timeout_s: float | None = Field(
        None, gt=0, description="whole-request timeout; default: target.request_deadline_s"
    )
    first_byte_timeout_s: float = Field(
        60.0,
        gt=0,
        allow_inf_nan=False,
        description="the longest wait for the first byte of an answer that begins at once (any "
        "GET, a streamed answer's headers): a server that takes a request and never answers "
        "is given up after it, not after read_timeout_s",
    )
    retries: int = Field(0, ge=0, le=10, description="attempts after the first, on a failure")
    backoff_s: float = Field(0.5, gt=0, description="wait before the first retry, doubled after")
    backoff_max_s: float = Field(8.0, gt=0, description="longest wait between attempts")
    retry_statuses: tuple[int, ...] = Field(
        (429, 500, 502, 503, 504),
        description="HTTP statuses retried (no answer at all — refused, timed out, cut off — "
        "always is)",
    )


class SmokeConfig(StrictModel):
    prompt: str = Field(
        "In one sentence, what does an SRE check before a deployment goes live?",
        description="the first request's question",
    )
    max_tokens: int = Field(48, ge=1, le=4096, description="answer length of the smoke requests")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="their sampling temperature")
    classes: bool = Field(True, description="also run the other post-start request classes")
    long_context_fraction: float = Field(0.5, gt=0, le=1, description="of max_model_len")
    shared_prompt_repeats: int = Field(
        3, ge=2, le=50, description="requests sharing one long system prompt (cache class)"
    )
    concurrent_sessions: int = Field(
        4, ge=1, le=256, description="multi-turn sessions held at once (concurrency class)"
    )
    sustained_s: float = Field(20.0, gt=0, description="the short sustained run")
    sustained_concurrency: int = Field(2, ge=1, description="requests in flight in that run")
    vision: bool = Field(False, description="the application sends images (multimodal class)")


class ParallelConfig(StrictModel):
    """The parallel layout the deployment is meant to run; the startup log must agree."""

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)


class CustomBuild(StrictModel):
    """The separate evidence track of a build that is not the official image."""

    source_branch: str
    commit: str
    lockfile: str
    build_command: str
    image_digest: str
    rollback_image: str


class EnvironmentConfig(StrictModel):
    image: str | None = Field(None, description="image reference, name:tag@sha256:digest")
    parallel: ParallelConfig | None = Field(None, description="declared tp/pp/dp/ep")
    custom_build: CustomBuild | None = Field(
        None, description="a build that is not the official image: its separate evidence track"
    )
    gpu_class: str | None = Field(None, description="the GPUs ordered, e.g. H200 (profile's)")
    gpus: int | None = Field(None, ge=1, description="how many GPUs in all (profile's)")


class AgentConfig(StrictModel):
    """The Agent API contract suite. Criticality decides what a repeated failure means:
    critical → hold; non-critical → observe-with-limits, naming the feature to disable."""

    repeat: int = Field(20, ge=1, le=1000, description="runs per case and per mode")
    cases: tuple[str, ...] | None = Field(None, description="case names to run; default all")
    schemas_file: str | None = Field(None, description="your tools (YAML/JSON), one case each")
    critical: tuple[str, ...] = Field((), description="cases to treat as critical")
    non_critical: tuple[str, ...] = Field((), description="cases whose failure is bounded")
    temperature: float = Field(0.6, ge=0.0, le=2.0, description="the production sampling")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="the production top_p")
    max_tokens: int = Field(160, ge=8, le=8192, description="answer length of an Agent request")
    concurrency: int = Field(4, ge=1, le=256, description="requests in flight at once")
    repeated_failures: int = Field(
        2,
        ge=1,
        le=2,
        description="failures of a critical case that make it fail (fewer: warn); at most 2, "
        "as 'repeated' means twice",
    )
    max_bounded_failure_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="a non-critical case failing in more than this share of its runs is not a "
        "known, bounded defect: hold",
    )
    retry_deadline_fraction: float = Field(
        0.5, gt=0.0, lt=1.0, description="client timeout, as a share of a normal answer's time"
    )
    client_reasoning_field: Literal["reasoning", "reasoning_content"] | None = Field(
        None,
        description="the message field your client reads reasoning from; checked against the "
        "field the server writes (agent.client_reasoning_field)",
    )


class OwnerRule(StrictModel):
    """Who fixes a failed item, by when, and how to roll back (matched by check id)."""

    match: str = Field(description="check-id pattern (fnmatch), e.g. capacity.*")
    owner: str
    deadline: str
    rollback: str


class SignoffConfig(StrictModel):
    actions: tuple[OwnerRule, ...] = Field(
        (), description="owners of failed items; the first matching rule wins"
    )
    trusted_keys: tuple[str, ...] = Field(
        (),
        description="public keys (PEM paths) one of which must have signed a bundle before "
        "golive signoff accepts it (as --trust-key)",
    )


class CacheConfig(StrictModel):
    """The prefix-cache proof's protocol."""

    prefix_tokens: int | None = Field(
        None,
        ge=16,
        description="shared prefix size in tokens; default: the profile's "
        "cache.min_shared_prefix_tokens (at least 8 cache blocks); a smaller one is a programme "
        "gap unless programme.relaxed names an owner",
    )
    warm_repeats: int = Field(5, ge=1, le=100, description="warm requests")
    cold_samples: int = Field(3, ge=1, le=100, description="cold requests for the TTFT test")
    warm_must_be_faster: bool = Field(
        True,
        description="reuse the counters prove but warm requests no faster (median TTFT) than "
        "the cold ones is a warn on cache.prefix_reuse",
    )
    after_load_probe: bool = Field(
        True,
        description="in a programme run, send the warm prefix once more after the sustained "
        "window (cache.after_load: kept or evicted by the load)",
    )


class WatchConfig(StrictModel):
    """The post-approval watch window."""

    duration_s: float = Field(600.0, gt=0, description="length of the watch window, seconds")
    interval_s: float = Field(10.0, gt=0, description="seconds between observations")
    probe_deadline_s: float = Field(30.0, gt=0, description="synthetic request deadline")
    tool_every: int = Field(6, ge=1, description="tool-call probe every N intervals")
    cache_every: int = Field(6, ge=1, description="cache probe every N intervals")
    repeated: int = Field(
        3,
        ge=1,
        le=30,
        description="intervals outside the envelope before a trigger (at most 30: more would "
        "switch the envelope's triggers off)",
    )
    missing_limit: int = Field(
        3, ge=1, le=30, description="silent intervals before an alert (at most 30)"
    )
    on_rollback: str | None = Field(None, description="command run on a rollback trigger")
    cooldown_s: float = Field(600.0, ge=0, description="seconds between two rollbacks")
    critical_probe: str | None = Field(
        None,
        description="the Agent case (shipped, or of agent.schemas_file) the tool-call probe "
        "runs: the team's critical workflow; default the profile's first critical calling "
        "case, else one_arg.required",
    )
    max_5xx_share: float = Field(
        0.05,
        ge=0,
        le=0.5,
        description="share of HTTP 5xx answers beyond which an interval alerts (at most 0.5: "
        "half the answers failing is never within bounds)",
    )


class RecordsConfig(StrictModel):
    """What the bundle keeps of the capacity phases' requests (thousands a minute on a GPU):
    every request's timings, status, ids and usage always; full bodies for every failure and
    a sample of the rest. The other sections keep every body."""

    full_body_first: int = Field(20, ge=0, description="first records of each phase kept whole")
    full_body_share: float = Field(
        0.02, ge=0, le=1, description="then one in 1/share kept whole (1 keeps every body)"
    )
    compress: bool = Field(True, description="zstd each phase's record stream when it ends")


class GoliveConfig(StrictModel):
    profile: str = Field("generic", description="generic | kimi-k3 | path to a profile YAML")
    not_k3: str | None = Field(
        None,
        pattern=r"\S",
        description="why a deployment whose model looks like Kimi K3 is not judged under the "
        "kimi-k3 profile (recorded in the verdict; a reason, never blank)",
    )
    target: TargetConfig = TargetConfig()
    client: ClientConfig = ClientConfig()
    smoke: SmokeConfig = SmokeConfig()
    environment: EnvironmentConfig = EnvironmentConfig()
    capacity: CapacityConfig = CapacityConfig()
    cache: CacheConfig = CacheConfig()
    agent: AgentConfig = AgentConfig()
    watch: WatchConfig = WatchConfig()
    signoff: SignoffConfig = SignoffConfig()
    records: RecordsConfig = RecordsConfig()
    slo: SloConfig = SloConfig()
    # None only where a saved config names no `programme` key: a new run always has one
    # (load_config), and `golive decide` judges such a bundle with the default
    programme: ProgrammeConfig | None = None
    policy: str | None = Field(None, description="decision policy file (default: bundled)")
    sign_key: str | None = Field(
        None, description="Ed25519 private key (PEM): sign the bundle's manifest with it"
    )


def with_node_curves(
    config: GoliveConfig, files: Sequence[Path], cluster: str | None, sampled: bool
) -> GoliveConfig:
    """The config with what the command line asks of the nodes' GPU memory (`--gpu-curve`
    files, sampling the `--chain-ray` cluster), so that the bundle's config says what the run
    read; sampling asked for with no cluster to sample is refused."""
    capacity = config.capacity
    asked = capacity.sample_gpus or sampled
    if asked and cluster is None:
        raise ConfigError("--sample-gpus samples the nodes of the --chain-ray cluster: give it")
    update = {"gpu_curves": (*capacity.gpu_curves, *map(str, files)), "sample_gpus": asked}
    return config.model_copy(update={"capacity": capacity.model_copy(update=update)})


def config_digest(config: GoliveConfig | Mapping[str, Any]) -> str:
    """verdict.json `config_digest`: the effective config as the run applied it (or as
    `config/effective.yaml` holds it, read back without the defaults of a later golive)."""
    data = config if isinstance(config, Mapping) else config.model_dump(mode="json")
    text = yaml.safe_dump(dict(data), sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def parse_config(text: str, source: str) -> GoliveConfig:
    """A config from its YAML text (the effective config a bundle keeps)."""
    return validated(GoliveConfig, parse_yaml(text, source), source)


__all__ = [  # CapacityConfig and StrictModel live in their own modules, read from here
    "AgentConfig",
    "CacheConfig",
    "CapacityConfig",
    "ClientConfig",
    "CustomBuild",
    "EnvironmentConfig",
    "GoliveConfig",
    "OwnerRule",
    "ParallelConfig",
    "RecordsConfig",
    "SignoffConfig",
    "SloConfig",
    "SmokeConfig",
    "StrictModel",
    "TargetConfig",
    "WatchConfig",
    "config_digest",
    "parse_config",
]
