"""What a command line names outside golive: the output paths it will write (refused before
any work when they cannot be written) and the deployment's own cluster, whose nodes or pods
the version chain is read from (`--ray`/`--chain-ray`, `--k8s-namespace`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from golive.checks.env.collect import EnvEvidence
from golive.errors import ConfigError
from golive.evidence.k8s_env import K8sSource, require_kubernetes
from golive.evidence.ray_env import RaySource, require_ray

# argument → what it names: a file golive writes, or a directory it fills
OUTPUT_FILES = ("junit", "output")
OUTPUT_DIRECTORIES = {"report": "output"}  # `golive report -o DIR`


def prepare_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the command runs (exit 2, naming the flag and the path), an output path
    that cannot be written: never a traceback after the run it came at the end of. Nothing is
    created here; the writer makes the missing folders when it writes."""
    for attr in OUTPUT_FILES:
        path: Path | None = getattr(args, attr, None)
        if path is None:
            continue
        is_dir = OUTPUT_DIRECTORIES.get(args.command) == attr
        flag = "--" + attr
        if not is_dir and path.is_dir():
            raise ConfigError(f"{flag} {path} is a directory; give a file path")
        folder = path if is_dir else path.parent
        existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise ConfigError(f"{flag} {path}: {existing} is not a folder; give another path")
        probe = existing / f".golive-write-check-{os.getpid()}"
        try:
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                f"{flag} {path}: {existing} is not writable ({exc.strerror or exc}); give "
                "another path"
            ) from exc


def cluster_evidence(args: argparse.Namespace, evidence: EnvEvidence, flag: str) -> EnvEvidence:
    """The chain read from the deployment itself: every node of its Ray cluster (`flag`), or
    its engine pods (`--k8s-namespace`), as `golive env` and `golive run` both read them."""
    if args.chain_ray is not None:
        require_ray()
        if args.expect_nodes is not None and args.expect_nodes < 1:
            raise ConfigError("--expect-nodes must be at least 1")
        source = RaySource(args.chain_ray, args.expect_nodes, args.ray_timeout, args.ray_container)
        evidence = dataclasses.replace(evidence, ray=source)
    elif args.expect_nodes is not None or args.ray_container:
        raise ConfigError(
            f"--expect-nodes and --ray-container are about the vLLM Ray cluster: give {flag} "
            "ADDRESS"
        )
    if args.k8s_namespace is not None:
        evidence = dataclasses.replace(evidence, k8s=k8s_source(args))
    return evidence


def k8s_source(args: argparse.Namespace) -> K8sSource | None:
    """The engine pods `--k8s-namespace` and `--selector` name (None: not given)."""
    if args.k8s_namespace is None:
        return None
    if not args.selector:
        raise ConfigError("--k8s-namespace needs --selector (the engine pods' labels)")
    require_kubernetes()
    return K8sSource(args.k8s_namespace, args.selector, args.k8s_container, args.kubeconfig)
