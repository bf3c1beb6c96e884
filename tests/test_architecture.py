"""The shape of palace_cli (docs/architecture.md): rooms by job, small modules, layers without cycles.

These read the source with `ast`; they fail when a change breaks a rule, and say where.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "palace_cli"
MAX_LOOSE_MODULES = 10
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES, MAX_LONG_FUNCTIONS = 60, 4
SQL_HOME = "palace_cli/index/store.py"
SQL_CALL = re.compile(r"\.(?:execute|executemany|executescript)\(|sqlite3\.connect\(")
# What each room may import, beside itself and errors/progress: the layers of docs/architecture.md.
CORE_ROOMS = {"core"}
FACES = {"cli", "lsp", "mcp", "watch"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _room(module: str) -> str:
    """The room of a module: its package under palace_cli, or the loose module's own name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _runtime_imports(path: Path) -> list[tuple[str, int]]:
    """palace_cli modules imported by a file when it runs (in functions too), not under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(branch.test) for node in ast.walk(branch)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((full if full in MODULES else node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.startswith("palace_cli")]


def _room_graph() -> dict[str, dict[str, str]]:
    """room -> {room it imports: one place that does}."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for module, path in MODULES.items():
        for imported, line in _runtime_imports(path):
            here, there = _room(module), _room(imported)
            if here and there and here != there:
                graph[here].setdefault(there, f"{path.relative_to(PACKAGE.parent)}:{line}")
    return graph


def test_few_loose_modules_at_the_top():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_MODULES, loose


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines; split it by concern"


def test_few_long_functions_outside_bench():
    long = []
    for module, path in MODULES.items():
        if _room(module) == "bench":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name} ({size} lines)")
    assert len(long) <= MAX_LONG_FUNCTIONS, long


def test_sql_only_in_the_store():
    allowed = {SQL_HOME}
    offenders = [str(p.relative_to(PACKAGE.parent)) for p in MODULES.values()
                 if SQL_CALL.search(p.read_text(encoding="utf-8"))]
    assert set(offenders) <= allowed, offenders


def test_no_import_cycle_between_rooms():
    graph = _room_graph()
    for start in list(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            room, path = stack.pop()
            for nxt in graph.get(room, {}):
                if nxt == start:
                    steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(path, path[1:] + [start])]
                    pytest.fail("import cycle: " + "; ".join(steps))
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))


def test_core_imports_no_other_room():
    wrong = {there: where for there, where in _room_graph().get("core", {}).items() if there not in ("errors",)}
    assert not wrong, f"core must stand alone: {wrong}"


def test_only_faces_import_bench():
    users = {room: where for room, deps in _room_graph().items() for there, where in deps.items()
             if there == "bench" and room not in FACES}
    assert not users, users


def test_no_room_imports_a_face():
    users = {(room, there): where for room, deps in _room_graph().items() for there, where in deps.items()
             if there in FACES and room not in FACES and room != "bench"}
    assert not users, users
