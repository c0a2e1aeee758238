"""The rollback artifact: accepted bundles in a local registry (a directory), each entry
keeping image digest, launch command, runtime variables, parallel settings and parser
options together. The rollback target is always an accepted artifact, never an untracked
rebuild. Default directory: $GOLIVE_REGISTRY, else ~/.local/share/golive/registry."""

from __future__ import annotations

import hashlib
import json
import os
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


def identity(root: Path) -> dict[str, Any]:
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
    return {
        "image": image,
        "image_digest": digests[0] if digests else _digest_of(image),
        # where the variables were read: the serving process, or only the probe's own
        "runtime_source": container.get("environment_source"),
        "vllm_version": facts.vllm_version if facts else container.get("vllm_version"),
        "launch_command": launch,
        "non_default_args": args,
        "runtime_variables": runtime,
        "parallel": {
            k: args.get(k)
            for k in (
                "tensor_parallel_size",
                "pipeline_parallel_size",
                "data_parallel_size",
                "enable_expert_parallel",
            )
        },
        "parsers": {k: args.get(k) for k in ("tool_call_parser", "reasoning_parser")},
        # None when neither the container's serve command nor the startup args are known
        "launch_config_digest": "sha256:" + hashlib.sha256(blob).hexdigest()
        if launch_known
        else None,
        # the startup log's arguments alone: what every section given --log can compute the
        # same way (the container's variables are known only where --container-info was given)
        "launch_args_digest": _sha256(json.dumps(args, sort_keys=True, default=str))
        if facts
        else None,
    }


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def artifact(root: Path, signature: dict[str, Any]) -> dict[str, Any]:
    """What a rollback needs, gathered from the bundle's own evidence and the signature."""
    verdict = VerdictDocument.read(root)
    return {
        "bundle": str(root.resolve()),
        "accepted_at": signature["signed_at"],
        "outcome": signature["outcome"],
        "verdict_outcome": verdict.outcome.value,
        "reviewer": signature["reviewer"],
        "bundle_digest": signature["bundle_digest"],
        **identity(root),
        "limits": verdict.limits.to_json(),
        "accepted_with_override": overridden(
            {**signature, "verdict_outcome": verdict.outcome.value}
        ),
        "override_reason": signature.get("override_reason"),
    }


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


def artifact_gaps(found: dict[str, Any]) -> list[str]:
    """What a rollback to this deployment would lack, each with how to give it: the image
    digest, the launch configuration, the serving process's own runtime variables."""
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


def require_artifact(root: Path, use: str, found: dict[str, Any] | None = None) -> None:
    """Refuse `use` (signing an accepted outcome, registering) for a bundle that cannot be
    rolled back to: the checklist's artifact is the accepted image and launch configuration,
    never an untracked rebuild. `found`: the bundle's identity, where already read."""
    gaps = artifact_gaps(identity(root) if found is None else found)
    if gaps:
        raise ConfigError(
            f"{root} cannot be the rollback artifact, so {use} is refused: it lacks "
            + "; ".join(gaps)
        )


def register(root: Path, signature: dict[str, Any], registry: Path, vouch: Vouch) -> Path | None:
    """Add a signed, accepted bundle to the registry; other outcomes are not artifacts."""
    if signature["outcome"] not in ACCEPTED:
        return None
    programme_scope(VerdictDocument.read(root), root, "the rollback registry")
    vouch(root, "the rollback registry", signature.get("override_reason"))
    entry = artifact(root, signature)  # the identity read once, for the check and the entry
    require_artifact(root, "registering it", entry)
    try:
        registry.mkdir(parents=True, exist_ok=True)
        stamp = entry["accepted_at"].replace(":", "").replace("-", "")
        path = registry / f"{stamp}-{entry['bundle_digest'][7:19]}.json"
        path.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
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
