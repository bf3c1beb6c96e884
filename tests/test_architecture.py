"""The shape of palace_cli (docs/architecture.md): rooms in one order, small modules, each concept decided once.

Every check is a function of a package folder that returns what it found, so test_planted_violations_are_caught
runs the same code over a copy with violations planted in it. The checks read the source with `ast`: every
import (relative, in functions, both branches of `if TYPE_CHECKING:`, `importlib.import_module` and `__import__`
of a literal, and the `"palace_cli.x:function"` strings of a reader table) and the shapes of a few concepts.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PACKAGE = REPO / "palace_cli"

# The order of rooms, lowest first: a room imports only rooms before it. docs/architecture.md states the same
# order on a line of its own (test_the_docs_state_the_same_order). `palace` is the loose module palace.py;
# `faces` are cli/, lsp/, mcp.py and watch.py, and a face imports no other face.
ORDER = ["core", "conversations", "backends", "index", "palace", "search", "answers", "editing", "study", "memory",
         "importers", "capture", "bench", "faces"]
FACES = {"cli", "lsp", "mcp", "watch"}
BESIDE_CORE = {"errors", "progress"}  # any room may import them; they import nothing of the package
FRONT_DOOR = "__init__"  # palace_cli/__init__.py, the library's public names: it may import any room below faces

# Imports against the order, (from room, to room) -> why. The list only shrinks: test_exceptions_are_still_needed
# fails on an entry no import needs any more.
EXCEPTIONS = {
    ("cli", "lsp"): "`palace lsp` starts the language server: the CLI is the one door to every face",
    ("cli", "mcp"): "`palace mcp` starts the MCP server: the CLI is the one door to every face",
    ("cli", "watch"): "`palace watch` runs the watcher: the CLI is the one door to every face",
}

MAX_LOOSE_MODULES = 10
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50  # outside bench/; none may be longer but today's, each to be split (the list only shrinks)
LONG_FUNCTIONS: dict[str, str] = {}
SQL_HOME = "index/store.py"
SQL_CALL = re.compile(r"\.(?:execute|executemany|executescript)\(|sqlite3\.connect\(")

# One rule per concept: concept -> its home (files, or file:Class.function, relative to palace_cli/). A second
# rule outside the home fails test_one_rule_each, found by name and by shape (the detectors below).
HOMES = {
    "domain of a path": ("core/layout.py:NoteRules.domain_of",),
    "slug of a name": ("core/text.py",),
    "the frontmatter block": ("core/notefile.py",),
    "the folder walk": ("core/walk.py:note_files",),
    "the walk's skip list": ("core/layout.py",),
    "word tokens": ("core/text.py",),
    "stems": ("core/text.py",),
    "stopwords": ("core/text.py",),
    "atomic writes": ("core/disk.py",),
}
# Today's second rules, `file:scope` -> why it is still there. Only shrinks (test_second_rules_are_still_there).
FOLD = "issue 30 item 3: to fold into "
BM25 = ("the BM25 analyzer: whoosh's tokenizer, stopwords and Porter stems make the index's terms "
        "(index/text.py is the only whoosh user; the ranking figures depend on them)")
SECOND_RULES = {
    "domain of a path": {},
    "slug of a name": {},
    "the frontmatter block": {},
    "the folder walk": {},
    "the walk's skip list": {},
    "word tokens": {
        "index/text.py:<module>": BM25,
    },
    "stems": {
        "index/text.py:<module>": BM25,
    },
    "stopwords": {
        "index/text.py:<module>": BM25,
    },
    "atomic writes": {
        "index/vectors.py:VectorStore._write": FOLD + "core/disk.py (arrays written as they are saved)",
    },
}
# bench/ measures, on corpora of its own: like the long-function rule, the one-rule checks leave it out.
ONE_RULE_OUTSIDE = ("bench/",)

# Every write to a note goes through editing/ (docs/architecture.md, "The path of a note edit"): confined to the
# palace, under the write lock, planned whole and journaled (editing/writes.py). core's writers (core/disk.py's atomic
# writes, core/noteedit.py's frontmatter and section writers) are used only by editing/, by core/ itself, by index/
# (the generated index files and the caches under .palace/) and by bench/ (corpora of its own, in folders it made).
# Anywhere else a use is listed here, `file:scope` -> what it writes, which is never a note. The list only shrinks.
NOTE_WRITERS = ("atomic_write", "create_new", "rename_in_place", "update_frontmatter", "replace_section")
NOTE_WRITERS_FROM = ("core.disk", "core.noteedit")
WRITERS_HOME = ("editing/", "core/", "index/", "bench/")
OTHER_WRITES = {
    "backends/install.py:_write_manifest": "the model manifest in the models folder (not a note)",
    "backends/static.py:save_table": "the static embedder's table of vectors, in the models folder (not a note)",
    "backends/cache.py:CachedGenerator.complete": "a generator's response, cached in a file of its own (not a note)",
    "capture/settings.py:_save": "Claude Code's settings.json, where `palace hook install` puts the hook",
    "importers/chats/writer.py:_write": "session files under conversations/, confined to it: imported "
                                         "chats, read by the session walk, never notes; in bulk, on threads",
    "importers/writer.py:declare_domains": "palace.toml, which gains the [domains.*] tables of an import",
    "importers/writer.py:write_queries": "the benchmark queries of an import (queries.jsonl, or the path given)",
    "study/evolver.py:_save_proposal": "the Image `evolve` showed, under .palace/proposals/, so --accept writes it",
}


# ---- reading the package ---------------------------------------------------------------------------------------


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of a package folder."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@lru_cache(maxsize=None)
def _parse(text: str) -> ast.Module:
    return ast.parse(text)


def tree(path: Path) -> ast.Module:
    """The parsed source of a file, cached by its text: a planted copy parses only the file that changed."""
    return _parse(path.read_text(encoding="utf-8"))


def room(module: str) -> str:
    """The room of a dotted module name: its package under palace_cli, a loose module's own name, or the front door."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FRONT_DOOR


def shown(path: Path, package: Path) -> str:
    """A file as findings name it: relative to the package folder (`index/store.py`)."""
    return path.relative_to(package).as_posix()


def dotted(node: ast.AST) -> str:
    """A call's function as written, cheaply: `os.replace`, `re.compile`, `?.rglob` for `sorted(x).rglob`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return "?"


@dataclass(frozen=True)
class Import:
    """One import of a package module by another, and how it was written."""

    source: str  # the importing module
    target: str  # the imported module (or the deepest existing package of it)
    where: str   # file:line
    how: str     # "import", "relative", "type-only", "else of TYPE_CHECKING", "importlib", "__import__", "table"


def _typing_branches(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """(node, how) for every node under `if TYPE_CHECKING:`, its body as "type-only" and its else as such."""
    for branch in ast.walk(node):
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in dotted(branch.test):
            for part, how in ((branch.body, "type-only"), (branch.orelse, "else of TYPE_CHECKING")):
                for statement in part:
                    for inner in ast.walk(statement):
                        yield inner, how


def _package_of(module: str, path: Path) -> list[str]:
    """The package a relative import in this module starts from."""
    parts = module.split(".")
    return parts if path.name == "__init__.py" else parts[:-1]


@lru_cache(maxsize=None)  # a package folder is read once a run: the real one, or a planted copy in a tmp_path
def imports(package: Path) -> list[Import]:
    """Every import of a package module by another, however written; targets outside the package are left out."""
    known = modules(package)
    name = package.name
    table = re.compile(rf"^{name}(\.\w+)+:\w+$")

    def resolve(base: str, names: list[str]) -> list[str]:
        return [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names] or [base]

    found: list[Import] = []
    for module, path in known.items():
        parsed = tree(path)
        typing = {id(node): how for node, how in _typing_branches(parsed)}
        for node in ast.walk(parsed):
            targets, how = [], "import"
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    start = _package_of(module, path)
                    base = ".".join(start[: len(start) - node.level + 1] + ([node.module] if node.module else []))
                    how = "relative"
                else:
                    base = node.module or ""
                targets = resolve(base, [alias.name for alias in node.names])
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                called = dotted(node.func)
                literal = node.args[0].value
                if called in ("importlib.import_module", "import_module"):
                    how = "importlib"
                    if literal.startswith("."):
                        given = _literal(node.args[1]) if len(node.args) > 1 else None
                        package_arg = given or ".".join(_package_of(module, path))
                        level = len(literal) - len(literal.lstrip("."))
                        start = package_arg.split(".")
                        literal = ".".join(start[: len(start) - level + 1] + [literal.lstrip(".")])
                    targets = [literal]
                elif called == "__import__":
                    targets, how = [literal], "__import__"
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and table.match(node.value):
                targets, how = [node.value.split(":")[0]], "table"
            if id(node) in typing:
                how = typing[id(node)] + ("" if how == "import" else f", {how}")
            for target in targets:
                if target == name or target.startswith(name + "."):
                    while target not in known and "." in target:
                        target = target.rsplit(".", 1)[0]  # `from palace_cli.x import name`: the module x
                    found.append(Import(module, target, f"{shown(path, package)}:{node.lineno}", how))
    return found


def _rank(room_name: str) -> float | None:
    """Where a room stands in ORDER (None: a room the order does not name)."""
    if room_name in BESIDE_CORE:
        return -1
    if room_name in FACES:
        return ORDER.index("faces")
    if room_name == FRONT_DOOR:
        return ORDER.index("faces") - 0.5
    return ORDER.index(room_name) if room_name in ORDER else None


def room_edges(package: Path) -> dict[tuple[str, str], list[Import]]:
    """(room, room it imports) -> the imports that make that edge, between different rooms."""
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for found in imports(package):
        here, there = room(found.source), room(found.target)
        if here != there:
            edges[(here, there)].append(found)
    return edges


def _described(found: list[Import]) -> str:
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return ", ".join(f"{i.where} ({i.how})" for i in found[:3]) + more


# ---- the checks: each takes a package folder and returns what breaks a rule ---------------------------------


def unknown_rooms(package: Path) -> list[str]:
    """Rooms of the package that ORDER does not place."""
    return sorted({room(m) for m in modules(package) if _rank(room(m)) is None})


def against_the_order(package: Path) -> dict[tuple[str, str], str]:
    """(room, room) -> where, for every import that does not go down ORDER (a face importing a face included)."""
    wrong = {}
    for (here, there), found in room_edges(package).items():
        low, high = _rank(there), _rank(here)
        if low is None or high is None or not low < high:
            wrong[(here, there)] = _described(found)
    return wrong


def cycles(package: Path) -> list[str]:
    """Import cycles between rooms, type-only imports counted."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for (here, there), found in room_edges(package).items():
        graph[here][there] = _described(found)
    found_cycles = []
    for start in sorted(graph):
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, {})):
                if nxt == start and start == min(path):  # each cycle once, from its first room
                    steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(path, path[1:] + [start])]
                    found_cycles.append("; ".join(steps))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found_cycles


def core_imports(package: Path) -> dict[str, str]:
    """Rooms the core imports besides itself, errors and progress -> where."""
    return {there: _described(found) for (here, there), found in room_edges(package).items()
            if here == "core" and there not in BESIDE_CORE}


@lru_cache(maxsize=None)
def long_functions(package: Path) -> dict[str, int]:
    """`file:Class.function` -> lines, for every function over MAX_FUNCTION_LINES outside bench/."""
    found = {}
    for module, path in modules(package).items():
        if room(module) == "bench":
            continue
        for qualname, node in _functions(tree(path)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                found[f"{shown(path, package)}:{qualname}"] = size
    return found


def _functions(parsed: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) for every function and method, nested ones too."""
    for node in ast.iter_child_nodes(parsed):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def big_modules(package: Path) -> dict[str, int]:
    """Modules over MAX_MODULE_LINES -> lines."""
    sizes = {shown(p, package): p.read_text(encoding="utf-8").count("\n") for p in modules(package).values()}
    return {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}


def sql_outside_the_store(package: Path) -> list[str]:
    """Files other than SQL_HOME that run SQL."""
    return [shown(p, package) for p in modules(package).values()
            if shown(p, package) != SQL_HOME and SQL_CALL.search(p.read_text(encoding="utf-8"))]


# ---- one rule per concept ---------------------------------------------------------------------------------------
# A detector looks at the nodes of one scope (a function, or a module's top level) and returns (line, what) for each
# sign of the concept, by name (a definition called `slugify`) or by shape (a regex replaced by "-"). A finding is
# keyed `file:scope`: one scope that decides a concept again is one entry, however many lines show it.

# (scope name, scope node, its own nodes, the package's name) -> [(line, what)]
Detector = Callable[[str, ast.AST, list[ast.AST], str], list[tuple[int, str]]]


def _word_set(value: ast.AST) -> set[str]:
    """The words of a literal word collection: `frozenset("a b c".split())`, `{"a", "b"}`, and `|` of them."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        return _word_set(value.left) | _word_set(value.right)
    if isinstance(value, ast.Call) and dotted(value.func) in ("frozenset", "set", "tuple", "list") and value.args:
        return _word_set(value.args[0])
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "split" \
            and isinstance(value.func.value, ast.Constant) and isinstance(value.func.value.value, str):
        return set(value.func.value.value.split())
    if isinstance(value, (ast.Set, ast.List, ast.Tuple)):
        return {e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                and re.fullmatch(r"[a-z][a-z']*", e.value)}
    return set()


@lru_cache(maxsize=None)
def _scopes(parsed: ast.Module) -> list[tuple[str, ast.AST, list[ast.AST]]]:
    """(qualified name, node, its own nodes) for the module's top level and each function; a function's own nodes
    leave out the functions inside it (a class body belongs to the scope around it)."""
    def own(node: ast.AST) -> list[ast.AST]:
        found, stack = [], list(ast.iter_child_nodes(node))
        while stack:
            child = stack.pop()
            found.append(child)
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.extend(ast.iter_child_nodes(child))
        return found

    return [("<module>", parsed, own(parsed)), *((name, node, own(node)) for name, node in _functions(parsed))]


def _defines(scope: ast.AST, pattern: str) -> bool:
    """True for a function named like pattern that decides something itself (one that only calls a function
    of its own name, `return self.rules.domain_of(relpath)`, hands the decision to it)."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or not re.search(pattern, scope.name):
        return False
    body = [s for s in scope.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call):
        called = body[0].value.func
        return (called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)) != scope.name
    return True


def _number(node: ast.AST | None) -> int | None:
    """The value of an int literal (`-3` is a minus applied to 3 in the tree)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _calls(nodes: list[ast.AST], *names: str) -> Iterator[ast.Call]:
    """Calls in nodes whose function is written as one of names (`os.replace`) or ends with `.name` (`.rglob`)."""
    for node in nodes:
        if isinstance(node, ast.Call):
            written = dotted(node.func)
            if any(written == n or (n.startswith(".") and written.endswith(n)) for n in names):
                yield node


def _imported_names(nodes: list[ast.AST], package: str, pattern: str) -> Iterator[tuple[int, str]]:
    """(line, name) for names matching pattern imported from outside the package (a library's stemmer)."""
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and not node.level and not (node.module or "").startswith(package):
            for alias in node.names:
                if re.search(pattern, alias.name):
                    yield node.lineno, f"imports {alias.name} from {node.module}"


def domain_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A `domain_of` of its own, or a path's parts read as `parts[1] if parts[0] == MEMORIES`."""
    found = [(scope.lineno, "defines domain_of")] if _defines(scope, r"^domain_of$") else []
    firsts = {dotted(n.left.value): n.lineno for n in nodes if isinstance(n, ast.Compare)
              and isinstance(n.left, ast.Subscript) and _number(n.left.slice) == 0
              and (dotted(n.comparators[0]) == "MEMORIES" or _literal(n.comparators[0]) == "memories")}
    seconds = {dotted(n.value) for n in nodes if firsts and isinstance(n, ast.Subscript) and _number(n.slice) == 1}
    found += [(line, f"reads {parts}[1] as the domain") for parts, line in firsts.items() if parts in seconds]
    return found


SLUG_SHAPE = re.compile(r"^(\[\^[^\]]+\]|\[\\W[^\]]*\]|\\W)\+$")


def slug_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A function named for slugs, or a run of anything but letters and digits replaced by "-"."""
    found = [(scope.lineno, f"defines {scope.name}")] if _defines(scope, r"slug") else []
    for call in _calls(nodes, "re.sub"):
        pattern = _literal(call.args[0]) if call.args else None
        if pattern and len(call.args) > 1 and _literal(call.args[1]) in ("-", "_") and SLUG_SHAPE.match(pattern):
            found.append((call.lineno, f"re.sub({pattern!r}, {_literal(call.args[1])!r})"))
    return found


def _is_fence(text: str) -> bool:
    return re.match(r"^\^?(\\r\?\\n|\\n|\n)?---", text) is not None or "\n---" in text


def frontmatter_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A `split_frontmatter` of its own, or a `---` line looked for: startswith/find/split/compare or a regex."""
    found = [(scope.lineno, f"defines {scope.name}")] if _defines(scope, r"^_?(split|read|parse)_?front_?matter") \
        else []
    for node in nodes:
        if isinstance(node, ast.Call) and node.args and _literal(node.args[0]) is not None \
                and _is_fence(_literal(node.args[0])):
            written = dotted(node.func)
            method = written.rsplit(".", 1)[-1]
            if written.startswith("re.") or method in ("startswith", "endswith", "find", "rfind", "index", "split",
                                                       "partition", "removeprefix", "count"):
                found.append((node.lineno, f"{method}({_literal(node.args[0])!r})"))
        elif isinstance(node, ast.Compare) and any(_literal(c) is not None and _is_fence(_literal(c))
                                                   for c in [node.left, *node.comparators]):
            found.append((node.lineno, "compares a line with '---'"))
    return found


def walk_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A walk of a folder tree: os.walk, rglob, a `**` glob, or os.scandir/listdir inside a loop over a stack."""
    found = [(c.lineno, dotted(c.func)) for c in _calls(nodes, "os.walk", ".rglob", "glob.iglob")]
    found += [(c.lineno, f"glob({_literal(c.args[0])!r})") for c in _calls(nodes, ".glob")
              if c.args and "**" in (_literal(c.args[0]) or "")]
    loops = [n for n in nodes if isinstance(n, ast.While)]
    inside = {id(inner) for loop in loops for inner in ast.walk(loop)}
    found += [(c.lineno, f"{dotted(c.func)} in a while loop") for c in _calls(nodes, "os.scandir", "os.listdir")
              if id(c) in inside]
    return found


def skip_list_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A list of folders a walk skips: a SKIP*DIRS name, or the folder names only such lists hold."""
    found = [(n.lineno, f"defines {t.id}") for n in nodes if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name) and re.search(r"SKIP\w*DIR", t.id)]
    found += [(n.lineno, f"names {n.value!r}") for n in nodes
              if _literal(n) in ("node_modules", "__pycache__")]
    return sorted(set(found))


WORD_PROBE = "retries need jitter, twice: about (forty) sessions."
PROBE_WORDS = set(re.findall(r"[a-z]+", WORD_PROBE))


def _tokenizes_words(pattern: str, flags: int) -> bool:
    """True when a regex picks the words out of prose one by one, whatever its syntax: three of the probe's words
    come out whole and no match holds a letter and punctuation (`twice:` is a YAML or JSON scalar, not a word).
    Anchored patterns (a key, a line) are not word tokenizers."""
    if pattern.startswith(("^", "\\A")) or pattern.endswith("$"):
        return False
    try:
        matches = [m.group(0) for m in re.finditer(pattern, WORD_PROBE, flags)]
    except re.error:
        return False
    mixed = any(re.search(r"[a-z]", m) and re.search(r"[:.,()]", m) for m in matches)
    return len(PROBE_WORDS & set(matches)) >= 3 and not mixed


def word_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A regex that cuts text into words (compiled, or given to findall/finditer/split/sub), or a library tokenizer."""
    found = []
    for call in _calls(nodes, "re.compile", "re.findall", "re.finditer", "re.split", "re.sub"):
        pattern = _literal(call.args[0]) if call.args else None
        flags = call.args[1] if call.func.attr == "compile" and len(call.args) > 1 else \
            next((k.value for k in call.keywords if k.arg == "flags"), None)
        ignore = re.IGNORECASE if flags is not None and re.search(r"\bI\b|IGNORECASE", ast.unparse(flags)) else 0
        if pattern is not None and _tokenizes_words(pattern, ignore):
            found.append((call.lineno, f"{dotted(call.func)}({pattern!r})"))
    found += _imported_names(nodes, package, r"(?i)tokeni[sz]|default_pattern")
    return found


STEM_SUFFIXES = {"ies": 3, "ing": 3}


def stem_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A stemmer: a function named stem*, a library's, -ies or -ing cut off (`word[:-3]`), or two words compared
    by their first letters (`a[:5] == b[:5]`)."""
    found = [(scope.lineno, f"defines {scope.name}")] if _defines(scope, r"^_?stem|stemm|_stem$") else []
    found += _imported_names(nodes, package, r"(?i)^stem|stemmer|porter|lemmati")
    cuts = {-_number(n.slice.upper) for n in nodes if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice)
            and n.slice.lower is None and (_number(n.slice.upper) or 0) < 0}
    for call in _calls(nodes, ".endswith", ".removesuffix"):
        arg = call.args[0] if call.args else None
        suffixes = {_literal(e) for e in arg.elts} if isinstance(arg, ast.Tuple) else {_literal(arg)}
        stripped = sorted(s for s in suffixes if STEM_SUFFIXES.get(s) in cuts)
        if stripped:
            found.append((call.lineno, f"strips {stripped}"))
    for node in nodes:
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq) \
                and all(isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Slice) and s.slice.lower is None
                        and _number(s.slice.upper) is not None for s in (node.left, node.comparators[0])):
            found.append((node.lineno, f"compares words by a prefix: {ast.unparse(node)}"))
    return found


def stopword_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A list of words to leave out: a library's; a word set named *STOP*; or one that extends core's STOPWORDS,
    united with it or tested beside it (`w in STOPWORDS or w in CHAT_WORDS`)."""
    found = list(_imported_names(nodes, package, r"(?i)stop_?words?"))
    if name != "<module>":
        return found
    beside = set()  # names tested in the same condition as STOPWORDS, or united with it
    for node in ast.walk(scope):
        if isinstance(node, (ast.BoolOp, ast.BinOp)):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if "STOPWORDS" in names:
                beside |= names
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            label, words = node.targets[0].id, _word_set(node.value)
            united = "STOPWORDS" in {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if united or len(words) >= 10 and ("STOP" in label or label in beside):
                found.append((node.lineno, f"{label}: {len(words)} words"))
    return found


def atomic_write_detector(name: str, scope: ast.AST, nodes: list[ast.AST], package: str) -> list[tuple[int, str]]:
    """A write by temp file and rename: os.replace/os.rename, Path.replace/rename(target), a named temp file, or a
    function named *atomic*."""
    found = [(scope.lineno, f"defines {scope.name}")] if _defines(scope, r"atomic") else []
    found += [(c.lineno, dotted(c.func)) for c in _calls(nodes, "os.replace", "os.rename", "tempfile.mkstemp",
                                                               "tempfile.NamedTemporaryFile", "NamedTemporaryFile")]
    found += [(c.lineno, f"{dotted(c.func)}(target)") for c in _calls(nodes, ".replace", ".rename")
              if len(c.args) == 1 and not c.keywords and not dotted(c.func).startswith(("os.", "re."))]
    return found


DETECTORS: dict[str, Detector] = {
    "domain of a path": domain_detector,
    "slug of a name": slug_detector,
    "the frontmatter block": frontmatter_detector,
    "the folder walk": walk_detector,
    "the walk's skip list": skip_list_detector,
    "word tokens": word_detector,
    "stems": stem_detector,
    "stopwords": stopword_detector,
    "atomic writes": atomic_write_detector,
}


def _at_home(key: str, home: tuple[str, ...]) -> bool:
    file, scope = key.split(":", 1)
    return any(file == h or (":" in h and h.split(":")[0] == file and (scope == h.split(":")[1]
                                                                        or scope.startswith(h.split(":")[1] + ".")))
               for h in home)


@lru_cache(maxsize=None)
def second_rules(package: Path, concept: str) -> dict[str, list[str]]:
    """`file:scope` -> what shows the concept decided there, for every scope outside the concept's home."""
    home, detect = HOMES[concept], DETECTORS[concept]
    found: dict[str, list[str]] = {}
    for path in modules(package).values():
        relative = shown(path, package)
        if relative.startswith(ONE_RULE_OUTSIDE):
            continue
        for name, scope, nodes in _scopes(tree(path)):
            key = f"{relative}:{name}"
            if _at_home(key, home):
                continue
            signs = detect(name, scope, nodes, package.name)
            if signs:
                found[key] = [f"line {line}: {what}" for line, what in sorted(set(signs))]
    return found


# ---- writes to notes ---------------------------------------------------------------------------------------------


def _writer_names(nodes: list[ast.AST], package: str) -> set[str]:
    """The names core's writers go by in a file (`from palace_cli.core.disk import atomic_write as write`)."""
    sources = {f"{package}.{module}" for module in NOTE_WRITERS_FROM}
    return {alias.asname or alias.name for node in nodes if isinstance(node, ast.ImportFrom)
            and (node.module in sources or node.level and (node.module or "").endswith(("disk", "noteedit")))
            for alias in node.names if alias.name in NOTE_WRITERS}


@lru_cache(maxsize=None)
def note_writes(package: Path) -> dict[str, list[str]]:
    """`file:scope` -> where it uses one of core's writers (calls it, or hands it on: `pool.map(atomic_write, ...)`),
    for every scope outside WRITERS_HOME."""
    found: dict[str, list[str]] = {}
    for path in modules(package).values():
        relative = shown(path, package)
        if relative.startswith(WRITERS_HOME):
            continue
        parsed = tree(path)
        names = _writer_names(list(ast.walk(parsed)), package.name)
        for scope_name, _scope, nodes in _scopes(parsed):
            uses = [f"line {n.lineno}: {n.id}" for n in nodes if isinstance(n, ast.Name) and n.id in names]
            uses += [f"line {n.lineno}: {dotted(n)}" for n in nodes
                     if isinstance(n, ast.Attribute) and n.attr in NOTE_WRITERS]
            if uses:
                found[f"{relative}:{scope_name}"] = sorted(set(uses))
    return found


def note_writes_outside_editing(package: Path) -> dict[str, list[str]]:
    """Uses of core's writers outside WRITERS_HOME that OTHER_WRITES does not list."""
    return {key: uses for key, uses in note_writes(package).items() if key not in OTHER_WRITES}


# ---- what fails: the checks with today's exceptions taken out ---------------------------------------------------


def order_violations(package: Path) -> dict[tuple[str, str], str]:
    """Imports against ORDER that EXCEPTIONS does not excuse."""
    return {pair: where for pair, where in against_the_order(package).items() if pair not in EXCEPTIONS}


def second_rule_violations(package: Path, concept: str) -> dict[str, list[str]]:
    """Second rules of a concept that SECOND_RULES does not excuse."""
    return {key: signs for key, signs in second_rules(package, concept).items() if key not in SECOND_RULES[concept]}


def new_long_functions(package: Path) -> dict[str, int]:
    """Functions over MAX_FUNCTION_LINES outside bench/ that LONG_FUNCTIONS does not excuse."""
    return {key: size for key, size in long_functions(package).items() if key not in LONG_FUNCTIONS}


def test_every_room_has_a_place_in_the_order():
    assert not unknown_rooms(PACKAGE), "add the room to ORDER here and in docs/architecture.md"


def test_imports_go_down_the_order():
    wrong = order_violations(PACKAGE)
    assert not wrong, f"these rooms import a room after them in ORDER (or a face imports a face): {wrong}"


def test_exceptions_are_still_needed():
    stale = set(EXCEPTIONS) - set(against_the_order(PACKAGE))
    assert not stale, f"no import needs these exceptions any more: take them out of EXCEPTIONS: {sorted(stale)}"


def test_no_import_cycle_between_rooms():
    found = cycles(PACKAGE)
    assert not found, f"import cycles between rooms (type-only imports count): {found}"


def test_core_imports_no_other_room():
    found = core_imports(PACKAGE)
    assert not found, f"core must stand alone (errors and progress beside it): {found}"


def test_the_docs_state_the_same_order():
    """docs/architecture.md has the order as a line of its own: `core < conversations < ... < faces`."""
    lines = [line for line in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
             if re.match(r"^\W*core\s*<", line)]
    assert len(lines) == 1, f"one line `core < ... < faces` in docs/architecture.md, found {lines}"
    assert [re.match(r"\W*(\w+)", part).group(1) for part in lines[0].split("<")] == ORDER


def test_few_loose_modules_at_the_top():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_no_module_is_too_long():
    found = big_modules(PACKAGE)
    assert not found, f"split these by concern: {found}"


def test_no_long_functions_outside_bench():
    found = new_long_functions(PACKAGE)
    assert not found, f"split these: no function over {MAX_FUNCTION_LINES} lines outside bench/: {found}"


def test_long_functions_list_is_current():
    stale = set(LONG_FUNCTIONS) - set(long_functions(PACKAGE))
    assert not stale, f"these are short now (or gone): take them out of LONG_FUNCTIONS: {sorted(stale)}"


def test_sql_only_in_the_store():
    found = sql_outside_the_store(PACKAGE)
    assert not found, f"SQL belongs in {SQL_HOME}: {found}"


@pytest.mark.parametrize("concept", sorted(HOMES))
def test_one_rule_each(concept):
    found = second_rule_violations(PACKAGE, concept)
    assert not found, f"{concept} is decided in {HOMES[concept]}; use it there instead of deciding again: {found}"


@pytest.mark.parametrize("concept", sorted(HOMES))
def test_second_rules_are_still_there(concept):
    stale = set(SECOND_RULES[concept]) - set(second_rules(PACKAGE, concept))
    assert not stale, f"folded already: take these out of SECOND_RULES[{concept!r}]: {sorted(stale)}"


def test_notes_are_written_only_through_editing():
    found = note_writes_outside_editing(PACKAGE)
    assert not found, ("write notes through editing/writes.py (apply, write_note, set_fields, set_section), or list "
                       f"what else is written in OTHER_WRITES with why it is not a note: {found}")


def test_other_writes_are_still_there():
    stale = set(OTHER_WRITES) - set(note_writes(PACKAGE))
    assert not stale, f"no longer written there: take these out of OTHER_WRITES: {sorted(stale)}"


READER_CASE = """\
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import palace_cli.answers.verify
from palace_cli.search import hits
from . import text
from ..index import store

if TYPE_CHECKING:
    from palace_cli.palace import Palace
else:
    from palace_cli.editing import lint

READERS = {"markdown": "palace_cli.importers.markdown:read_markdown"}


def later():
    from palace_cli.study.session import StudySession
    importlib.import_module("palace_cli.memory.distill")
    importlib.import_module(".curate", "palace_cli.editing")
    __import__("palace_cli.capture.settings")
    return StudySession
"""


def test_the_reader_reads_every_form(tmp_path):
    """One file with every way to import: each is read, with how it was written."""
    package = tmp_path / "palace_cli"
    for module in ("core/text", "core/notes", "index/store", "answers/verify", "search/hits", "palace",
                   "editing/lint", "editing/curate", "study/session", "memory/distill", "importers/markdown",
                   "capture/settings"):
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).with_suffix(".py").write_text("", encoding="utf-8")
    for folder in [package, *(p for p in package.iterdir() if p.is_dir())]:
        (folder / "__init__.py").touch()
    (package / "core" / "notes.py").write_text(READER_CASE, encoding="utf-8")
    found = {(i.target, i.how) for i in imports(package) if i.source == "palace_cli.core.notes"}
    assert found == {
        ("palace_cli.answers.verify", "import"), ("palace_cli.search.hits", "import"),
        ("palace_cli.core.text", "relative"), ("palace_cli.index.store", "relative"),
        ("palace_cli.palace", "type-only"), ("palace_cli.editing.lint", "else of TYPE_CHECKING"),
        ("palace_cli.importers.markdown", "table"), ("palace_cli.study.session", "import"),
        ("palace_cli.memory.distill", "importlib"), ("palace_cli.editing.curate", "importlib"),
        ("palace_cli.capture.settings", "__import__"),
    }


def test_the_real_package_has_the_forms_the_reader_reads():
    """The package's own reader table and type-only imports are among what is read (a reader that dropped a
    form would let today's imports through unseen)."""
    hows = {(i.where.split(":")[0], i.how) for i in imports(PACKAGE)}
    assert ("importers/formats.py", "table") in hows
    assert ("palace.py", "type-only") in hows


# ---- planted violations: each caught by its check, run over a copy of the package -------------------------------

TYPING = "from typing import TYPE_CHECKING\n"
PLANTS = {
    "a relative import up a layer": (
        "search/hits.py", "from ..answers import verify\n", order_violations),
    "importlib.import_module of a face from core": (
        "core/text.py",
        "def face():\n    import importlib\n\n    return importlib.import_module('palace_cli.cli.render')\n",
        core_imports),
    "an import in the else of TYPE_CHECKING": (
        "index/files.py", TYPING + "if TYPE_CHECKING:\n    pass\nelse:\n    from palace_cli.editing import lint\n",
        order_violations),
    "a type-only import making a cycle": (
        "core/notes.py", TYPING + "if TYPE_CHECKING:\n    from palace_cli.index.store import Store\n", cycles),
    "index importing search": (
        "index/scope.py", "def ranked():\n    from palace_cli.search.retrieve import recall\n\n    return recall\n",
        order_violations),
    "a second slugify": (
        "importers/records.py", "def slugify(text):\n    return re.sub(r'[^a-z0-9]+', '-', text.lower())\n",
        lambda package: second_rule_violations(package, "slug of a name")),
    "a second stemmer": (
        "study/examiner.py", "def plural(word):\n    return word[:-3] + 'y' if word.endswith('ies') else word\n",
        lambda package: second_rule_violations(package, "stems")),
    "a second atomic write": (
        "editing/curate.py", "def swap(temp, path):\n    os.replace(temp, path)\n",
        lambda package: second_rule_violations(package, "atomic writes")),
    "a note written around editing": (
        "memory/consolidate.py",
        "def promote(path):\n    from palace_cli.core.noteedit import update_frontmatter\n\n"
        "    update_frontmatter(path, {'core': True})\n", note_writes_outside_editing),
    "a writer handed on under another name": (
        "study/session.py", "from ..core.disk import atomic_write as put\n\n\ndef save(items):\n"
        "    return list(map(put, items))\n", note_writes_outside_editing),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_violations_are_caught(plant, tmp_path):
    """Each planted violation makes a finding its check did not have on the real package, naming the planted file."""
    file, code, check = PLANTS[plant]
    copy = tmp_path / PACKAGE.name
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / file, "a", encoding="utf-8") as handle:
        handle.write("\n\n" + code)
    before, after = check(PACKAGE), check(copy)
    new = [str(f) + " " + str(after[f]) if isinstance(after, dict) else f for f in after if f not in before]
    assert any(file in finding for finding in new), f"{plant} in {file} was not caught: {new}"
