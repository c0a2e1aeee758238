"""No string key carries data between stages (issue 32 §3): a check's measurements are read by
key only in the module that writes that key; every other stage reads them through the typed
accessor that module owns (`capacity.measured.ramp_ceiling`, `sustained_window`,
`coverage.named_gaps` …). A read by a string literal (or an f-string, or a key constant
imported from another module) of `x.measurements`, `verdict.measurements(id)`, a name bound to
either, or a parameter named `measurements`, in a module that does not write that key, is
named here with its file and line."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SOURCE = Path(__file__).parents[2] / "src" / "golive"

# (module path under src/golive, key): a reader allowed to name a key it does not write, with
# the reason it may. Keep it short: an entry here is a string key crossing a stage.
ALLOWED: dict[tuple[str, str], str] = {}


def _is_measurements(node: ast.expr, bound: set[str]) -> bool:
    """`x.measurements`, `x.measurements(...)`, or a name bound to one of them (or a parameter
    named `measurements`)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr == "measurements"
    return isinstance(node, ast.Name) and node.id in bound


def _key(node: ast.expr, imported: set[str]) -> str | None:
    """The key a read names: a string literal, an f-string (its pattern), or an imported
    constant's name (marked); None for a key computed here (a loop over every key)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ast.unparse(node)
    if isinstance(node, ast.Name) and node.id in imported:
        return f"<imported {node.id}>"
    return None


def _measurement_dicts(tree: ast.Module) -> Iterator[ast.Dict]:
    """Dict displays that become a check's measurements: bound to a name that says so
    (`measurements = {...}`), or handed straight to a call (`cap_result(..., {...})`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "measurement" in t.id for t in targets):
                yield node.value
        elif isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            yield from (v for v in values if isinstance(v, ast.Dict))


def _written(tree: ast.Module) -> set[str]:
    """The keys this module writes into measurements: string keys of those dicts and of item
    stores into a name that says so, the value of a module-level constant (`CEILING =
    "ceiling"`), and `f-string` where it writes a key built by one."""
    keys: set[str] = set()
    stores = [
        node.slice
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and "measurement" in node.value.id
    ]
    for key in [*stores, *(k for d in _measurement_dicts(tree) for k in d.keys)]:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
        elif isinstance(key, ast.JoinedStr):
            keys.add("f-string")
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            keys.add(statement.value.value)
    return keys


def _imported(tree: ast.Module) -> set[str]:
    """Names this module imports from another golive module."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("golive")
        for alias in node.names
    }


def _bound(function: ast.AST) -> set[str]:
    """Names a function binds to a check's measurements, and its parameters so named."""
    names = set()
    if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        names |= {a.arg for a in function.args.args + function.args.kwonlyargs}
        names &= {"measurements"}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and _is_measurements(node.value, set()):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.NamedExpr) and _is_measurements(node.value, set()):
            names.add(node.target.id)
    return names


def _reads(tree: ast.Module) -> Iterator[tuple[int, ast.expr]]:
    """(line, key expression) of every keyed read of a check's measurements."""
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    seen: set[int] = set()
    for scope in scopes:
        bound = _bound(scope)
        for node in ast.walk(scope):
            if id(node) in seen:
                continue
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and _is_measurements(node.func.value, bound)
            ):
                seen.add(id(node))
                yield node.lineno, node.args[0]
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Load)
                and _is_measurements(node.value, bound)
            ):
                seen.add(id(node))
                yield node.lineno, node.slice
            elif (
                isinstance(node, ast.Compare)
                and len(node.ops) == 1
                and isinstance(node.ops[0], ast.In | ast.NotIn)
                and _is_measurements(node.comparators[0], bound)
            ):
                seen.add(id(node))
                yield node.lineno, node.left


def keyed_reads(source: Path = SOURCE) -> list[str]:
    """`path:line: key` for each read of a measurement key the reading module does not own."""
    found = []
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        written, imported = _written(tree), _imported(tree)
        name = path.relative_to(source).as_posix()
        for line, node in _reads(tree):
            key = _key(node, imported)
            if key is None or (name, key) in ALLOWED:
                continue
            owned = key in written or (isinstance(node, ast.JoinedStr) and "f-string" in written)
            if not owned:
                found.append(f"{name}:{line}: {key}")
    return found


def test_measurements_are_read_through_their_writers_accessors() -> None:
    """Every read of a check's measurement by key names a key its own module writes: a stage
    that needs another check's figure calls the accessor beside that figure's writer, so a key
    is spelled once and the reader gets a typed value."""
    assert keyed_reads() == []


def test_allow_list_states_reasons() -> None:
    """Each allowed cross-module read says why it may name the key."""
    assert all(reason.strip() for reason in ALLOWED.values())
