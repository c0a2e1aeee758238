"""`environment.image`: the image the deployment runs, named and confirmed (issue 29 §7).

The operator names the image (`--image`, `environment.image`) or the container facts do
(`golive env collect --container --image`). What the deployment's own facts say it runs
confirms or contradicts that name: the serving container's repo digests (and each Ray node's),
and each engine pod's spec image and resolved imageID (`environment/k8s-pods.json`); not the
reference typed to the collector, which is the operator's word again. A named
digest must be in every fact that lists digests (one that lists others is another image: a
fail naming it), and, under a profile that names the image, some fact must show that digest
under the image's repository (the registry aside): a digest known only under another
repository is not shown to be the profile's image (`no_data`). A name typed alone is a claim:
under such a profile it is `no_data` until a fact confirms it. An image id (an image loaded,
not pulled) says no repo digest, neither for nor against. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from golive.checks.env.chain_inputs import ChainInputs
from golive.evidence.image_ref import DIGEST, same_repository, split_image
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status

CHECK = "environment.image"
_SCHEMES = ("docker-pullable://", "docker://", "containerd://")


@dataclass(frozen=True, slots=True)
class RunningImage:
    """One image reference a deployment fact gives: where, its repository, tag and digest
    (None where the fact gives none)."""

    where: str
    repository: str
    tag: str | None
    digest: str | None


def running_images(inputs: ChainInputs) -> list[RunningImage]:
    """Every image reference the deployment's facts give, with the file that gives it."""
    found: list[RunningImage] = []
    containers = [(inputs.container, inputs.container_path), *inputs.node_containers]
    for container, path in containers:
        # its repo digests, as the container runtime resolved them; not `image`, which is
        # the reference typed to `golive env collect --container --image`
        if container is not None:
            found += [_reference(path, ref) for ref in container.image_digests]
    for pod in inputs.pods:
        found += [_reference(inputs.pods_path, r) for r in (pod.image, pod.image_id) if r]
    return found


def _reference(where: str, ref: str) -> RunningImage:
    for scheme in _SCHEMES:
        ref = ref.removeprefix(scheme)
    if DIGEST.fullmatch(ref):  # an image id (loaded or imported, not pulled): no repo digest
        return RunningImage(where, "", None, None)
    name, tag, digest = split_image(ref)
    return RunningImage(where, name, tag, digest)


def check_image(inputs: ChainInputs) -> CheckResult:
    expected = inputs.profile.chain.image
    critical = expected is not None
    if inputs.image is None:
        return ENVIRONMENT_RESULT(
            CHECK,
            Status.NO_DATA,
            "no image reference given (--image, environment.image, or container info)",
            critical=critical,
        )
    name, tag, digest = split_image(inputs.image.value)
    measurements: dict[str, str | None] = {"image": inputs.image.value, "digest": digest}
    where = [inputs.image.where]

    def result(
        status: Status, summary: str, also: list[str] | None = None, weight: bool = critical
    ) -> CheckResult:
        return ENVIRONMENT_RESULT(
            CHECK, status, summary, measurements, critical=weight, evidence=[*where, *(also or [])]
        )

    if expected is not None:
        want_name, want_tag, _ = split_image(expected)
        if not same_repository(name, want_name) or tag != want_tag:
            return result(
                Status.FAIL,
                f"image {name}:{tag} is not the profile's image {expected} (a general CUDA "
                "image or another build is not the official recipe)",
                weight=True,
            )
    if digest is not None and not DIGEST.fullmatch(digest):
        return result(
            Status.FAIL,
            f"image {inputs.image.value} names {digest!r} after '@', which is not a digest: give "
            "name:tag@sha256:<64 hex> so the exact image is known and can be rolled back to",
        )
    running = running_images(inputs)
    if digest is not None:
        other = _other_digests(running, digest)
        if other:
            measurements["running_digests"] = "; ".join(f"{w}: {d}" for w, d in other.items())
            return result(
                Status.FAIL,
                f"image {inputs.image.value} names digest {digest}, but the deployment runs "
                + "; ".join(f"{d} ({w})" for w, d in other.items())
                + ": the evidence describes another image than the one deployed",
                sorted(other),
                weight=True,
            )
    elif inputs.profile.chain.image_digest_required:
        return result(
            Status.NO_DATA,
            f"image {inputs.image.value} has no digest recorded; give name:tag@sha256:... so the "
            "exact image is known and can be rolled back to",
        )
    confirming = [
        r
        for r in running
        if same_repository(r.repository, name)
        and (r.digest == digest if digest is not None else r.tag == tag)
    ]
    elsewhere = sorted({r.repository for r in running if digest and r.digest == digest})
    if critical and not confirming and elsewhere:
        # one digest is one image, but under another name it is not shown to be this one
        return result(
            Status.NO_DATA,
            f"digest {digest} runs here as {', '.join(elsewhere)}, not as {name}: that it is "
            "the profile's image is not shown (a mirror under another path, or another build). "
            "Pull it under the profile's name, or judge it with a profile naming your mirror",
            sorted({r.where for r in running if r.digest == digest}),
        )
    if critical and not confirming:
        # the profile asserts the image: what the operator typed is a claim, not evidence
        return result(
            Status.NO_DATA,
            f"image {inputs.image.value} is as {inputs.image.where} says it: no serving "
            "container's digests nor engine pod's image confirm it. Give the container's facts "
            "(`golive env collect --container --image REF` -> --container-info) or the pods "
            "(--k8s-namespace, --selector), so the image judged is the one running",
        )
    sources = sorted({r.where for r in confirming})
    return result(
        Status.PASS,
        f"image {inputs.image.value}"
        + ("" if expected is None else " is the profile's image")
        + (f", as {', '.join(sources)} confirms" if sources else ""),
        sources,
    )


def _other_digests(running: list[RunningImage], digest: str) -> Mapping[str, str]:
    """Each fact that lists digests, none of them `digest`: where -> what it lists."""
    listed: dict[str, set[str]] = {}
    for image in running:
        if image.digest is not None:
            listed.setdefault(image.where, set()).add(image.digest)
    return {w: ", ".join(sorted(d)) for w, d in sorted(listed.items()) if digest not in d}
