"""What `pip install golive` would get: the wheel's and sdist's metadata agree with
pyproject.toml and the README, the `golive` command points at the CLI, and every file the
runtime reads at run time (templates, profiles, the stdlib probes, py.typed) is shipped."""

from __future__ import annotations

import importlib
import platform
import tarfile
import tomllib
import zipfile
from configparser import ConfigParser
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.package.conftest import REPO, Built

PROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
SOURCE = REPO / "src" / "golive"


def _wheel_text(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(f".dist-info/{suffix}")]
        return archive.read(name).decode()


def _metadata(wheel: Path) -> Message:
    return Parser().parsestr(_wheel_text(wheel, "METADATA"))


def _runtime_files() -> set[str]:
    """Every file under src/golive that is not plain Python source, and the scripts golive
    sends to other interpreters (they live in folders with no __init__.py)."""
    found = set()
    for path in SOURCE.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        if path.suffix != ".py" or path.parent.name == "scripts":
            found.add(path.relative_to(SOURCE.parent).as_posix())
    return found


def test_wheel_metadata_agrees_with_pyproject_and_readme(built: Built) -> None:
    """`pip show golive` names the project, version, Python floor, licence and dependencies
    pyproject.toml declares, and PyPI would render the README as its page."""
    meta = _metadata(built.wheel)
    assert meta["Name"] == PROJECT["name"]
    assert Version(meta["Version"]) == Version(PROJECT["version"])
    assert SpecifierSet(meta["Requires-Python"]) == SpecifierSet(PROJECT["requires-python"])
    assert meta["License-Expression"] == PROJECT["license"]
    assert meta["Description-Content-Type"] == "text/markdown"
    description = meta.get_payload()
    assert isinstance(description, str)
    assert description.strip() == (REPO / "README.md").read_text().strip()
    runtime = {
        str(r) for r in map(Requirement, meta.get_all("Requires-Dist") or []) if not r.marker
    }
    assert runtime == {str(Requirement(d.split("#")[0])) for d in PROJECT["dependencies"]}


def test_the_running_python_is_one_the_wheel_accepts(built: Built) -> None:
    """The wheel is pure Python for every platform, and this interpreter meets its floor (a
    wheel refusing the Python the suite runs on could not be installed by its users)."""
    assert built.wheel.name.endswith("-py3-none-any.whl")
    floor = SpecifierSet(_metadata(built.wheel)["Requires-Python"])
    assert platform.python_version() in floor


def test_the_golive_command_is_the_cli_entry_point(built: Built) -> None:
    """Installing the wheel puts a `golive` command on PATH that calls the CLI's main."""
    entry_points = ConfigParser()
    entry_points.read_string(_wheel_text(built.wheel, "entry_points.txt"))
    assert dict(entry_points["console_scripts"]) == {"golive": PROJECT["scripts"]["golive"]}
    module, _, attribute = entry_points["console_scripts"]["golive"].partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_every_runtime_file_is_in_the_wheel_and_the_sdist(built: Built) -> None:
    """The report template, the profiles, the stdlib probes golive pipes into other Pythons
    and the py.typed marker are all shipped: a file left out fails only on a user's machine,
    at the moment the run needs it."""
    needed = _runtime_files()
    assert {"golive/py.typed", "golive/evidence/scripts/container_probe.py"} <= needed
    assert any(name.endswith(".j2") for name in needed)
    with zipfile.ZipFile(built.wheel) as archive:
        in_wheel = set(archive.namelist())
    with tarfile.open(built.sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        in_sdist = {name.removeprefix(f"{root}/src/") for name in archive.getnames()}
    assert needed - in_wheel == set()
    assert needed - in_sdist == set()


def test_every_module_of_the_source_is_in_the_wheel(built: Built) -> None:
    """No package is missed by discovery: each .py under src/golive is in the wheel."""
    modules = {
        p.relative_to(SOURCE.parent).as_posix()
        for p in SOURCE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    with zipfile.ZipFile(built.wheel) as archive:
        assert modules - set(archive.namelist()) == set()


def test_the_sdist_describes_the_same_release(built: Built) -> None:
    """The sdist's PKG-INFO names the same project and version as the wheel built from it."""
    with tarfile.open(built.sdist) as archive:
        (info,) = [
            m
            for m in archive.getmembers()
            if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        ]
        extracted = archive.extractfile(info)
        assert extracted is not None
        pkg_info = Parser().parsestr(extracted.read().decode())
    wheel = _metadata(built.wheel)
    assert (pkg_info["Name"], pkg_info["Version"]) == (wheel["Name"], wheel["Version"])
