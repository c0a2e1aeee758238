"""Container image references: `name:tag@sha256:...` split into its parts, and whether two
names are one repository whatever registry served them. Facts about a reference, no rule."""

from __future__ import annotations

import re

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """("vllm/vllm-openai", "kimi-k3", "sha256:...") from `name:tag@sha256:...` (what follows
    `@` as written: `DIGEST` says whether it is one)."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def same_repository(a: str, b: str) -> bool:
    """One repository, whatever registry it was pulled from (`docker.io/library/x` is `x`,
    `registry.corp:5000/vllm/vllm-openai` is `vllm/vllm-openai`); a mirror that renames the
    path (`quay.io/acme/vllm-openai`) is not shown to be the same."""
    left, right = _path(a), _path(b)
    return bool(left) and left == right


def _path(repository: str) -> str:
    parts = repository.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts and parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts)
