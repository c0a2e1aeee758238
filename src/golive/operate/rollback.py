"""The rollback artifact: accepted bundles in a local registry (a directory), each entry
keeping image digest, launch command, runtime variables, parallel settings and parser
options together. The rollback target is always an accepted artifact, never an untracked
rebuild. Default directory: $GOLIVE_REGISTRY, else ~/.local/share/golive/registry."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from golive.bundle.layout import CHAIN_INPUTS, CONTAINER
from golive.bundle.store import BundleReader, locate
from golive.checks.env.judge import serving_launch
from golive.errors import ConfigError
from golive.evidence.image_ref import DIGEST, split_image
from golive.results import Outcome
from golive.verdict.document import VerdictDocument

ACCEPTED = ("go-live", "observe-with-limits")


class Vouch(Protocol):
    """Refuses a bundle `golive decide` does not re-derive to its sealed verdict, naming what
    differs (a ConfigError). The commands here that accept a bundle — the rollback registry,
    `watch --accepted`, guardrails — sit below re-derivation, so the orchestration layer
    gives them its `require_rederived`; none of them runs without one."""

    def __call__(self, root: Path, use: str, override_reason: str | None = None) -> object: ...


def programme_scope(verdict: VerdictDocument, where: Path, use: str) -> None:
    """Only a bundle of the whole programme can be accepted, signed or watched as such."""
    scope = verdict.scope
    if scope != "programme":
        ran = ", ".join(scope) if isinstance(scope, tuple) else "unknown (written before scope)"
        raise ConfigError(
            f"{where} holds sections only ({ran}), not the whole programme: {use} needs a "
            "programme bundle from golive run, or golive decide --combine over section bundles"
        )


_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def registry_dir(given: Path | None = None) -> Path:
    if given is not None:
        return given
    env = os.environ.get("GOLIVE_REGISTRY")
    return Path(env) if env else Path.home() / ".local/share/golive/registry"


# the serving process's variables a relaunch must restore: every family the container probe
# reads (its PREFIXES: the allocator's PYTORCH_CUDA_ALLOC_CONF, NVIDIA_VISIBLE_DEVICES, ...)
# and the hub's
RUNTIME_PREFIXES = (
    "VLLM_",
    "NCCL_",
    "CUDA_",
    "PYTORCH_",
    "TORCH_",
    "NVIDIA_",
    "LD_LIBRARY_PATH",
    "HF_",
)


@dataclass(frozen=True, slots=True)
class DeploymentIdentity:
    """What a rollback relaunches: image, launch, runtime variables and parsers, read from a
    bundle's evidence (a registry entry keeps them: `RollbackArtifact`)."""

    image: str | None
    image_digest: str | None
    runtime_source: (
        str | None
    )  # where the variables were read: the serving process, or only the probe's own
    vllm_version: str | None
    launch_command: tuple[Any, ...]
    non_default_args: Mapping[str, Any]
    runtime_variables: Mapping[str, Any]
    parallel: Mapping[str, Any]
    parsers: Mapping[str, Any]
    # None when neither the container's serve command nor the startup args are known
    launch_config_digest: str | None
    # the startup log's arguments alone: what every section given --log can compute the
    # same way (the container's variables are known only where --container-info was given)
    launch_args_digest: str | None

    def to_json(self) -> dict[str, Any]:
        """The identity's part of a registry entry."""
        return {
            "image": self.image,
            "image_digest": self.image_digest,
            "runtime_source": self.runtime_source,
            "vllm_version": self.vllm_version,
            "launch_command": list(self.launch_command),
            "non_default_args": dict(self.non_default_args),
            "runtime_variables": dict(self.runtime_variables),
            "parallel": dict(self.parallel),
            "parsers": dict(self.parsers),
            "launch_config_digest": self.launch_config_digest,
            "launch_args_digest": self.launch_args_digest,
        }


def identity(root: Path) -> DeploymentIdentity:
    """Image, launch command, runtime variables and parsers, from the bundle's evidence; the
    launch-config digest covers the command, the non-default args and the variables."""
    container = _json(locate(root, CONTAINER)) or {}
    # the image as the run was given it (`--image`), from the chain's inputs the judges read,
    # never from chain.json, the summary written for people
    chain = _json(locate(root, CHAIN_INPUTS)) or {}
    facts = serving_launch(BundleReader(root))
    args = dict(facts.non_default_args) if facts else {}
    launch = list(container.get("serve_command") or [])
    launch_known = bool(launch or args)
    runtime = {
        k: v
        for k, v in (container.get("environment") or {}).items()
        if k.startswith(RUNTIME_PREFIXES) and not any(h in k.upper() for h in _SECRET_HINTS)
    }
    digests = [
        found[0] for d in container.get("image_digests") or [] if (found := DIGEST.search(str(d)))
    ]
    given = chain.get("image")
    image = container.get("image") or (given.get("value") if isinstance(given, dict) else given)
    blob = json.dumps([launch, args, runtime], sort_keys=True, default=str).encode()
    parallel = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    return DeploymentIdentity(
        image=image,
        image_digest=digests[0] if digests else _digest_of(image),
        runtime_source=container.get("environment_source"),
        vllm_version=facts.vllm_version if facts else container.get("vllm_version"),
        launch_command=tuple(launch),
        non_default_args=args,
        runtime_variables=runtime,
        parallel={k: args.get(k) for k in (*parallel, "enable_expert_parallel")},
        parsers={k: args.get(k) for k in ("tool_call_parser", "reasoning_parser")},
        launch_config_digest="sha256:" + hashlib.sha256(blob).hexdigest() if launch_known else None,
        launch_args_digest=_sha256(json.dumps(args, sort_keys=True, default=str))
        if facts
        else None,
    )


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Signature:
    """The reviewer's signature over a bundle (signoff.json `signature`)."""

    reviewer: str
    signed_at: str
    outcome: Outcome
    verdict_outcome: Outcome
    bundle_digest: str  # sha256 of the manifest signed
    override_reason: str | None
    taken_as_sealed: tuple[str, ...] = ()  # accepted on the bundle's word, by the override

    @property
    def override(self) -> bool:
        """A better outcome than the verdict's, or checks on the bundle's word: the registry
        keeps it "accepted with override", never the default rollback target."""
        return overridden(self.recorded())

    def recorded(self) -> dict[str, Any]:
        return {
            "reviewer": self.reviewer,
            "signed_at": self.signed_at,
            "outcome": self.outcome.value,
            "verdict_outcome": self.verdict_outcome.value,
            "bundle_digest": self.bundle_digest,
            "override_reason": self.override_reason,
            "taken_as_sealed": list(self.taken_as_sealed),
        }

    def to_json(self) -> dict[str, Any]:
        """signoff.json `signature`."""
        return {**self.recorded(), "override": self.override}


@dataclass(frozen=True, slots=True)
class RollbackArtifact:
    """A registry entry: what a rollback needs, from the bundle's evidence and its signature."""

    bundle: str
    accepted_at: str
    outcome: Outcome
    verdict_outcome: Outcome
    reviewer: str
    bundle_digest: str
    identity: DeploymentIdentity
    limits: Mapping[str, Any]  # verdict.json `limits`
    accepted_with_override: bool
    override_reason: str | None

    def to_json(self) -> dict[str, Any]:
        """The registry file's content."""
        return {
            "bundle": self.bundle,
            "accepted_at": self.accepted_at,
            "outcome": self.outcome.value,
            "verdict_outcome": self.verdict_outcome.value,
            "reviewer": self.reviewer,
            "bundle_digest": self.bundle_digest,
            **self.identity.to_json(),
            "limits": dict(self.limits),
            "accepted_with_override": self.accepted_with_override,
            "override_reason": self.override_reason,
        }


def artifact(root: Path, signature: Signature) -> RollbackArtifact:
    """What a rollback needs, gathered from the bundle's own evidence and the signature."""
    verdict = VerdictDocument.read(root)
    return RollbackArtifact(
        bundle=str(root.resolve()),
        accepted_at=signature.signed_at,
        outcome=signature.outcome,
        verdict_outcome=verdict.outcome,
        reviewer=signature.reviewer,
        bundle_digest=signature.bundle_digest,
        identity=identity(root),
        limits=verdict.limits.to_json(),
        accepted_with_override=overridden(
            {**signature.to_json(), "verdict_outcome": verdict.outcome.value}
        ),
        override_reason=signature.override_reason,
    )


def overridden(entry: dict[str, Any]) -> bool:
    """Accepted only by a reviewer's override: an outcome better than the verdict's, or
    checks taken on the bundle's word. Such an entry is never the default rollback target."""
    if entry.get("accepted_with_override") or entry.get("override") or entry.get("taken_as_sealed"):
        return True
    order = {o.value: o.severity for o in Outcome}
    signed, judged = (
        order.get(str(entry.get("outcome"))),
        order.get(str(entry.get("verdict_outcome"))),
    )
    return signed is None or judged is None or signed < judged


def _digest_of(image: str | None) -> str | None:
    digest = split_image(image)[2] if image else None
    return digest if digest and DIGEST.fullmatch(digest) else None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def artifact_gaps(found: DeploymentIdentity | Mapping[str, Any]) -> list[str]:
    """What a rollback to this deployment would lack, each with how to give it: the image
    digest, the launch configuration, the serving process's own runtime variables. `found`:
    a bundle's identity, or a registry entry as its file holds it."""
    if isinstance(found, DeploymentIdentity):
        found = found.to_json()
    gaps = []
    # entries registered before 2026-12 keep Docker's RepoDigest (`repo@sha256:…`)
    if not DIGEST.search(str(found.get("image_digest") or "")):
        gaps.append(
            "the image digest (the evidence names no digest: give --image NAME@sha256:… or "
            "--container-info collected in a digest-pinned container)"
        )
    if not found.get("launch_config_digest"):
        gaps.append(
            "the launch configuration (neither the serving command nor the startup log's "
            "arguments: give --container-info and --log)"
        )
    source = str(found.get("runtime_source") or "")
    if not source.startswith("serving process"):
        where = f"read from the {source}" if source else "not recorded"
        gaps.append(
            f"the serving process's runtime variables ({where}: run `golive env collect "
            "--container` inside the serving container while vLLM runs, and pass it with "
            "--container-info)"
        )
    return gaps


def require_artifact(root: Path, use: str, found: DeploymentIdentity | None = None) -> None:
    """Refuse `use` (signing an accepted outcome, registering) for a bundle that cannot be
    rolled back to: the checklist's artifact is the accepted image and launch configuration,
    never an untracked rebuild. `found`: the bundle's identity, where already read."""
    gaps = artifact_gaps(identity(root) if found is None else found)
    if gaps:
        raise ConfigError(
            f"{root} cannot be the rollback artifact, so {use} is refused: it lacks "
            + "; ".join(gaps)
        )


def register(root: Path, signature: Signature, registry: Path, vouch: Vouch) -> Path | None:
    """Add a signed, accepted bundle to the registry; other outcomes are not artifacts."""
    if signature.outcome.value not in ACCEPTED:
        return None
    programme_scope(VerdictDocument.read(root), root, "the rollback registry")
    vouch(root, "the rollback registry", signature.override_reason)
    entry = artifact(root, signature)  # the identity read once, for the check and the entry
    require_artifact(root, "registering it", entry.identity)
    try:
        registry.mkdir(parents=True, exist_ok=True)
        stamp = entry.accepted_at.replace(":", "").replace("-", "")
        path = registry / f"{stamp}-{entry.bundle_digest[7:19]}.json"
        path.write_text(json.dumps(entry.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write to the registry {registry}: {exc}") from exc
    return path


def accepted(registry: Path) -> list[dict[str, Any]]:
    """Accepted artifacts, oldest first."""
    entries = [e for p in sorted(registry.glob("*.json")) if (e := _json(p))]
    return sorted(entries, key=lambda e: str(e.get("accepted_at")))


def rollback_target(registry: Path, current: Path | None = None) -> dict[str, Any] | None:
    """The newest accepted artifact that is not the deployment being watched, was not
    accepted by an override, and holds what a rollback needs (an entry written before that
    rule, or by hand, without a digest or the server's own variables, is never the target)."""
    skip = str(current.resolve()) if current is not None else None
    candidates = [
        e
        for e in accepted(registry)
        if e.get("bundle") != skip and not overridden(e) and not artifact_gaps(e)
    ]
    return candidates[-1] if candidates else None
