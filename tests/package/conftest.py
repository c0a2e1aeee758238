"""The package tier: the sdist and wheel built as a release builds them (`python -m build`:
the sdist first, the wheel from the unpacked sdist), and the wheel installed into a fresh
venv with its dependencies, where nothing of this checkout is importable. Built once per
session (~15 s: build ~3 s, venv ~3 s, install ~8 s with pip's cache or a near index)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What this checkout's test run puts in the environment and a user's shell would not have.
LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would give an installed golive: this process's minus
    whatever would make the checkout's source importable."""
    env = {k: v for k, v in os.environ.items() if k not in LEAKS}
    return {**env, **extra}


def run(argv: list[str], cwd: Path, timeout_s: float, env: Mapping[str, str] | None = None) -> str:
    """Run a command to completion; its stdout, or a failure naming what it said."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    seconds: float


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    seconds: dict[str, float]

    @property
    def golive(self) -> Path:
        return self.venv / "bin" / "golive"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


# Left by `pip install -e .` or an earlier build: a stale src/golive.egg-info/SOURCES.txt
# feeds its file list into the next sdist, and would hide a file package-data leaves out.
GENERATED = shutil.ignore_patterns(
    "*.egg-info", "build", "dist", ".venv", ".git", "__pycache__", ".*_cache", ".hypothesis"
)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist and the wheel of this checkout, built from a copy of it without anything an
    install or build generated (as a fresh clone would build), into a folder of their own."""
    source = tmp_path_factory.mktemp("source") / "golive"
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    shutil.copytree(REPO, source, ignore=GENERATED, symlinks=True)
    run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], source, 600)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1, sorted(out.iterdir())
    assert len(wheels) == 1, sorted(out.iterdir())
    return Built(sdists[0], wheels[0], time.monotonic() - started)


@pytest.fixture(scope="session")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv (no system site-packages) with the wheel and its dependencies installed
    by pip, as `pip install golive-*.whl` would on a user's machine."""
    home = tmp_path_factory.mktemp("installed")
    venv = home / "venv"
    started = time.monotonic()
    run([sys.executable, "-m", "venv", str(venv)], home, 120)
    made = time.monotonic()
    run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", str(built.wheel)], home, 600)
    seconds = {"build": built.seconds, "venv": made - started, "install": time.monotonic() - made}
    return Installed(venv, built.wheel, seconds)
