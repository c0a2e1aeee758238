"""golive's layers (issue 32 §2): each package imports only its own layer and those below it,
so the import picture has no upward arrow and no two packages import each other. The order is
the README's "Layers" list; a module that breaks it is named with the import."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[2] / "src" / "golive"

# Bottom to top. "core" is every module directly under src/golive (config, results, errors,
# quantiles, metrics …) and profiles/: the vocabulary every layer shares.
LAYERS = (
    "core",
    "bundle",
    "evidence",
    "traffic",
    "target",
    "checks",
    "verdict",
    "report",
    "operate",
    "orchestration",
    "cli",
)
ENTRY_POINT = "golive.__main__"  # `python -m golive` starts the CLI: the one import from below


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "profiles" or (SOURCE / f"{parts[1]}.py").is_file():
        return "core"
    return parts[1]  # a package, placed in LAYERS or named as missing from it


def _module(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    return (SOURCE / name).is_dir() or (SOURCE / f"{name}.py").is_file()


def _imports(tree: ast.AST) -> list[str]:
    """Every golive module the tree imports, at the top or inside a function (lazy imports
    count: they are the same arrow)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("golive"):
            if node.module == "golive":  # a submodule, or a name of the root package (core)
                found.extend(
                    f"golive.{a.name}" if _is_module(a.name) else "golive" for a in node.names
                )
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith("golive"))
    return found


def _edges() -> list[tuple[str, str]]:
    edges: list[tuple[str, str]] = []
    for path in sorted(SOURCE.rglob("*.py")):
        module = _module(path)
        edges.extend((module, target) for target in _imports(ast.parse(path.read_text())))
    return edges


def upward(edges: list[tuple[str, str]]) -> list[str]:
    """The imports that point up the layer order (or into a package not in it)."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    found = []
    for module, target in edges:
        here, there = _layer(module), _layer(target)
        if module == ENTRY_POINT:
            continue
        if here not in rank or there not in rank:
            found.append(f"{module} -> {target}: package not in LAYERS")
        elif rank[there] > rank[here]:
            found.append(f"{module} ({here}) imports {target} ({there}), a layer above it")
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    """Every import in src/golive points down the layer order or stays in its package."""
    edges = _edges()
    assert len(edges) > 500  # the walk found golive's imports
    assert upward(edges) == []


def test_every_package_has_a_place_in_the_layer_order() -> None:
    """A new package must be placed in LAYERS (and the README's list) before it is used."""
    packages = {p.name for p in SOURCE.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"profiles"} <= set(LAYERS)


@pytest.mark.parametrize(
    ("edge", "named"),
    [
        (("golive.verdict.decide", "golive.orchestration.rederive"), True),
        (("golive.checks.owners", "golive.report.markdown"), True),
        (("golive.results", "golive.bundle.store"), True),
        (("golive.bundle.store", "golive.mystery.thing"), True),
        (("golive.orchestration.pipeline", "golive.verdict.decide"), False),
        (("golive.cli.main", "golive.config"), False),
        (("golive.__main__", "golive.cli.main"), False),
    ],
)
def test_the_layer_check_names_an_upward_import(edge: tuple[str, str], named: bool) -> None:
    """The check itself: an import up the order (or into an unknown package) is named, one down
    the order is not."""
    assert bool(upward([edge])) is named


def test_the_readme_lists_the_layers_in_this_order() -> None:
    """The README's Development section names the same layers, bottom to top."""
    readme = (SOURCE.parents[1] / "README.md").read_text()
    section = readme.split("## Development", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"^\d+\. \*\*(\w+)\*\*", section, re.M)
    assert tuple(named) == LAYERS
