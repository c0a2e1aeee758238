"""The container image: the Dockerfile read as a reviewer would (a pinned slim base, the
wheel built in a stage of its own, a non-root user, `golive` as the entrypoint, nothing it
copies hidden by .dockerignore), and, where this machine has a container builder, built
and run."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.package.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"
NO_BUILDER = "no container builder (docker/podman/buildah) on this machine"
ROOT_USERS = {"root", "0", "0:0", "root:root"}


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _base_images() -> list[str]:
    """Every FROM image, build arguments replaced by their defaults; stage names skipped."""
    defaults = dict(
        rest.split("=", 1) for word, rest in _instructions() if word == "ARG" and "=" in rest
    )
    names = {
        rest.split()[-1]
        for word, rest in _instructions()
        if word == "FROM" and " AS " in rest.upper()
    }
    images = []
    for word, rest in _instructions():
        if word == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], rest.split()[0])
            if image not in names:
                images.append(image)
    return images


def test_the_base_image_is_a_pinned_slim_python() -> None:
    """Each base is a slim Python image pinned to a patch release (or a digest), never
    `latest` or a bare major: a rebuild next month gets the same interpreter."""
    images = _base_images()
    assert images
    for image in images:
        name, _, tag = image.partition("@")[0].partition(":")
        assert name.endswith("python"), image
        assert "slim" in tag, image
        assert re.match(r"^\d+\.\d+\.\d+-", tag) or "@sha256:" in image, image


def test_the_wheel_is_built_in_its_own_stage_and_installed_in_the_last() -> None:
    """A multi-stage build: the last stage takes the wheel from an earlier one and installs
    it with pip, so no source tree or build tool is left in the runtime image."""
    stages = _stages()
    assert len(stages) >= 2
    builder = " ".join(rest for _, rest in stages[0])
    assert "build" in builder
    assert "--wheel" in builder
    final = stages[-1]
    assert any(word == "COPY" and rest.startswith("--from=") for word, rest in final)
    assert any(word == "RUN" and "pip install" in rest and ".whl" in rest for word, rest in final)


def test_golive_runs_as_a_non_root_user_as_its_entrypoint() -> None:
    """The last USER is not root and comes after every RUN; the entrypoint is `golive` in
    exec form, so signals reach it (SIGTERM seals a partial bundle)."""
    final = _stages()[-1]
    words = [word for word, _ in final]
    users = [rest for word, rest in final if word == "USER"]
    assert users
    assert users[-1] not in ROOT_USERS
    assert words.index("USER") > max(i for i, w in enumerate(words) if w == "RUN")
    entrypoints = [rest for word, rest in final if word == "ENTRYPOINT"]
    assert entrypoints
    assert json.loads(entrypoints[-1])[0] == "golive"


def _ignored(relative: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(relative, p) or relative.startswith(f"{p}/") for p in patterns)


def test_every_file_the_build_copies_exists_and_is_sent() -> None:
    """Each COPY source from the build context exists in the checkout and is not excluded by
    .dockerignore (the README is read by pyproject.toml's `readme`, so it must go in)."""
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    copied = []
    for word, rest in _instructions():
        if word == "COPY" and not rest.startswith("--from="):
            copied += rest.split()[:-1]
    assert project["readme"] in copied
    for source in copied:
        assert (REPO / source).exists(), source
        assert not _ignored(source, patterns), source
    assert _ignored(".venv", patterns)
    assert _ignored(".git", patterns)


def _builder() -> list[str]:
    """The command that builds an image here, or a skip naming why there is none."""
    docker = shutil.which("docker")
    if docker:
        answered = subprocess.run([docker, "info"], capture_output=True, timeout=30, check=False)
        if answered.returncode == 0:
            return [docker, "build"]
    for name, argv in (("podman", ["build"]), ("buildah", ["bud"])):
        found = shutil.which(name)
        if found:
            return [found, *argv]
    detail = " (docker is installed; its daemon does not answer)" if docker else ""
    pytest.skip(NO_BUILDER + detail)


def _runner(builder: list[str]) -> list[str]:
    name = Path(builder[0]).name
    return (
        [builder[0], "run", "--rm"]
        if name != "buildah"
        else [shutil.which("podman") or "podman", "run", "--rm"]
    )


def test_the_image_builds_and_answers_its_version(tmp_path: Path) -> None:
    """Where a container builder exists: the image builds from this checkout and
    `docker run IMAGE --version` prints this project's version, as a non-root user."""
    builder = _builder()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    tag = f"golive-package-test:{version}"
    subprocess.run([*builder, "-t", tag, str(REPO)], check=True, timeout=900)
    run = _runner(builder)
    said = subprocess.run(
        [*run, tag, "--version"], capture_output=True, text=True, timeout=120, check=True
    )
    assert said.stdout.strip() == f"golive {version}"
    uid = subprocess.run(
        [*run, "--entrypoint", "id", tag, "-u"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert uid.stdout.strip() != "0"
