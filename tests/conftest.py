"""Shared fixtures: small palaces copied into tmp_path, user dirs pointed into tmp_path."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"  # test files live in room folders: name data from here


def pytest_configure(config):
    # A suite started in the background by a non-interactive shell (`pytest &`, nohup) inherits SIGINT ignored,
    # and so would every process a test starts: the Ctrl-C tests (quiz, watch) would wait for an exit that never
    # comes. The processes the tests start get Ctrl-C as a user at a terminal has it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


EXAMPLE = REPO / "example-palace"
SHARED = REPO.parent / "shared"


def _namespaces() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


# Read-only bind mounts and small tmpfs mounts in an unprivileged user and mount namespace: no root needed,
# and nothing outside the test sees them.
needs_namespace = pytest.mark.skipif(not _namespaces(), reason="needs `unshare -rm` (user and mount namespaces) "
                                     "to mount a read-only bind or a small tmpfs without root")
# A launcher for a command that must see `$0` (its first argument) read-only: prefix it to the command.
READ_ONLY_LAUNCHER = ("unshare", "-rm", "sh", "-c",
                      'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"')


@pytest.fixture(autouse=True)
def user_dirs(tmp_path_factory, monkeypatch):
    """Keep every test away from the real user config and data dirs (models come from a shared cache)."""
    home = tmp_path_factory.mktemp("user-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("PALACE_DIR", raising=False)
    monkeypatch.setenv("PALACE_HOME", str(home / "palace-home"))  # no models unless a test asks for them
    # Commands embed in the foreground, as the library does: a test asserting a ranking sees every vector, and
    # no background worker outlives it (tests/index/test_worker.py sets "background" itself).
    monkeypatch.setenv("PALACE_VECTORS", "wait")
    yield


def copy_palace(source: Path, target: Path, git: bool = True) -> Path:
    """Copy a palace (without its .palace cache) and optionally make it a git repo with one commit."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".palace"))
    if git:
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
        subprocess.run(["git", "init", "-q"], cwd=target, check=True)
        subprocess.run(["git", "add", "-A"], cwd=target, check=True)
        subprocess.run(["git", "commit", "-qm", "start"], cwd=target, check=True, env=env)
    return target


def copy_tree(source: Path, target: Path) -> Path:
    """Copy a prepared palace byte for byte, .git and .palace included, links as links."""
    shutil.copytree(source, target, symlinks=True)
    return target


@pytest.fixture(scope="session")
def example_template(tmp_path_factory) -> Path:
    """example-palace as a git repo with one commit, made once a session: tests copy it (copy_tree), never use it."""
    return copy_palace(EXAMPLE, tmp_path_factory.mktemp("template") / "example-palace")


@pytest.fixture
def example_palace(example_template, tmp_path) -> Path:
    """A private copy of example-palace (a git repo), without models configured."""
    return copy_tree(example_template, tmp_path / "example-palace")


@pytest.fixture
def palace(example_palace):
    """A Palace object over a private copy of the example palace."""
    from palace_cli.palace import Palace

    return Palace(example_palace)


# ---- one example palace shared by the tests that only read it --------------------------------

def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file (or a link's target) under root, but SQLite's shared-memory index
    (every reader writes it) and an empty write-ahead log (a reader opens one)."""
    digest = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest[rel] = "-> " + os.readlink(path)
        elif path.is_file() and not rel.endswith("-shm") and not (rel.endswith("-wal") and not path.stat().st_size):
            digest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


@pytest.fixture(scope="session")
def _readonly_example(tmp_path_factory, example_template) -> tuple[Path, Path, dict[str, str]]:
    """(the shared copy, a pristine twin to restore it from, its digest), the index built once, lexical only."""
    from palace_cli.palace import Palace

    base = tmp_path_factory.mktemp("read-only")
    root = copy_tree(example_template, base / "example-palace")
    with pytest.MonkeyPatch.context() as mp:  # session fixtures are set up before user_dirs: the same dirs here
        mp.setenv("XDG_CONFIG_HOME", str(base / "config"))
        mp.setenv("XDG_DATA_HOME", str(base / "data"))
        mp.delenv("PALACE_DIR", raising=False)
        mp.setenv("PALACE_HOME", str(base / "palace-home"))
        built = Palace(root)
        built.refresh()
        built.index.close()
    # git refreshes the stat data of its index on the first status after a copy: do it now, not in a test
    subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True)
    return root, copy_tree(root, base / "pristine"), tree_digest(root)


@pytest.fixture
def readonly_example(_readonly_example) -> Path:
    """The example palace shared by every test that only reads it: a git repo, its lexical index built, no
    models. A test that changes, adds or removes one of its files fails, and the palace is restored."""
    root, pristine, digest = _readonly_example
    yield root
    now = tree_digest(root)
    changed = sorted(rel for rel in digest.keys() | now.keys() if digest.get(rel) != now.get(rel))
    if changed:
        shutil.rmtree(root)
        copy_tree(pristine, root)
        pytest.fail(f"this test wrote into the shared read-only example palace ({', '.join(changed[:8])}): "
                    "give it its own copy (the example_palace or palace fixture)", pytrace=False)


@pytest.fixture
def readonly_palace(readonly_example):
    """A Palace object over the shared read-only example palace (see readonly_example)."""
    from palace_cli.palace import Palace

    return Palace(readonly_example)


def _parse_notes(palace):
    """Every note parsed straight from disk, bypassing the cache: what the cache and the generated files are
    checked against (the first path keeps a duplicated id, as in the cache)."""
    from palace_cli.core.notefile import load_note
    from palace_cli.core.layout import Scan

    scan = Scan()
    for note_file in palace.note_files(scan.problems):
        memory = load_note(palace.root, note_file.relpath, note_file.domain)
        scan.memories.setdefault(memory.id, memory)
    return scan


@pytest.fixture
def parse_notes():
    """A function parsing every note of a Palace from disk, bypassing the cache (returns a Scan)."""
    return _parse_notes


# ---- a palace with every kind of bad file ---------------------------------------------------

GOOD = """---
id: {id}
subject: {subject}
anchor: {anchor}
keywords: [{keywords}]
verify: {verify}
---
# {subject}

## Image
You see {verify} dancing on a table.

## Content
Facts about {subject}.
"""


def note(note_id: str, subject: str = "", anchor: str = "an odd hook", keywords: str = "", verify: str = "") -> str:
    return GOOD.format(id=note_id, subject=subject or note_id.title(), anchor=anchor, keywords=keywords,
                       verify=verify or f"purple {note_id} walrus")


def alias_bomb(levels: int = 9) -> bytes:
    """A "billion laughs" note: each level a list of nine aliases of the level before (9**9 strings expanded)."""
    names = "abcdefghijklmnop"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"{names[i]}: &{names[i]} [" + ",".join(f"*{names[i - 1]}" for _ in range(9)) + "]")
    return ("---\nid: bomb\nsubject: Bomb\n" + "\n".join(lines) + "\n---\n# Bomb\n").encode()


@pytest.fixture(name="alias_bomb")
def alias_bomb_fixture():
    """The bytes of a 380-byte YAML alias bomb (line 8 crosses the expansion limit)."""
    return alias_bomb()


# Each case: relative path, bytes, the problem code lint reports, the line (None: whole file).
BAD_FILES = [
    ("memories/d/yaml.md", b"---\nid: yaml\nsubject: [oops\n---\n", "unreadable-note", 3),
    ("memories/d/list.md", b"---\n- a\n- b\n---\nbody\n", "unreadable-note", 2),
    ("memories/d/string.md", b"---\njust words\n---\nbody\n", "unreadable-note", 2),
    ("memories/d/indented.md", b" ---\nid: indented\n---\n", "unreadable-note", 1),
    ("memories/d/latin1.md", b"---\nid: latin1\nsubject: caf\xe9\n---\n", "unreadable-note", 3),
    ("memories/d/empty.md", b"", "unreadable-note", 1),
    ("memories/d/huge.md", b"---\nid: huge\n---\n" + b"y" * 1_000_001, "unreadable-note", None),
    ("memories/d/copy.md", note("alpha").encode(), "duplicate-id", 2),
    ("memories/loose.md", note("loose").encode(), "no-domain", None),
    ("notes/stray.md", note("stray").encode(), "outside-memories", 1),
    ("memories/d/bomb.md", alias_bomb(), "unreadable-note", 8),
    ("memories/d/conflict.md", note("conflict").replace("subject: Conflict\n", "<<<<<<< HEAD\nsubject: A\n=======\n"
                                                        "subject: B\n>>>>>>> theirs\n").encode(), "unreadable-note", 3),
]
WARNED_FILES = [
    ("memories/d/bom.md", b"\xef\xbb\xbf" + note("bom").encode(), "bom", 1),
    ("memories/d/crlf.md", note("crlf").replace("\n", "\r\n").encode(), "crlf", 1),
    ("memories/d/merged.md", (note("merged") + "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n").encode(),
     "conflict-marker", 15),
]
# Made by `messy` with links, a FIFO and odd names: (the path as reported, the code). None of them is read.
ODD_FILES = [
    ("memories/d/link.md", "symlink-outside"),  # to a note outside the palace
    ("memories/d/inner.md", "symlink-outside"),  # to a note in the palace but outside memories/
    ("memories/d/root", "symlink-outside"),  # a folder link to the palace root
    ("memories/d/loop", "symlink-loop"),  # a folder link to memories/
    ("memories/d/up", "symlink-loop"),  # `ln -s .. up`
    ("memories/d/self.md", "unreadable"),  # `ln -s self.md self.md`
    ("memories/d/fifo.md", "unreadable"),  # reading it would wait for a writer forever
    ("memories/d/new\\nline.md", "bad-name"),  # would split a line of the generated index files
    ("memories/d/caf\\xe9.md", "bad-name"),  # a name that is not UTF-8
]
READABLE = ["alpha", "beta", "bom", "crlf", "merged"]


@pytest.fixture
def odd_files():
    """(path as reported, lint code) of the links, FIFO and odd names `messy` makes."""
    return ODD_FILES


@pytest.fixture
def readable_ids():
    """The ids `messy` still reads, sorted."""
    return READABLE


def _note_bytes(root: Path) -> dict[Path, bytes]:
    generated = {root / "INDEX.md", root / "index"}
    return {p: p.read_bytes() for p in root.rglob("*.md")
            if p.is_file() and not p.is_symlink() and not generated & {p, p.parent}}


@pytest.fixture
def note_bytes():
    """A function giving the bytes of every regular .md file of a palace but the generated ones (no FIFO,
    no link): compare before and after a command that must not rewrite notes."""
    return _note_bytes


@pytest.fixture
def bad_files():
    """(relative path, bytes, lint code, line) of files that cannot be memories."""
    return BAD_FILES


@pytest.fixture
def warned_files():
    """(relative path, bytes, lint code, line) of notes that are read with a warning."""
    return WARNED_FILES


@pytest.fixture
def note_text():
    """A function writing the text of a good note: note_text(id, subject=, anchor=, keywords=, verify=)."""
    return note


@pytest.fixture
def messy(tmp_path) -> Path:
    """A palace with two good notes and every kind of bad file next to them."""
    root = tmp_path / "messy"
    (root / "memories" / "d").mkdir(parents=True)
    (root / "palace.toml").write_text('[palace]\nname = "Messy"\n')
    (root / "memories" / "d" / "alpha.md").write_text(note("alpha"))
    (root / "memories" / "d" / "beta.md").write_text(note("beta"))
    for relpath, data, _code, _line in BAD_FILES + WARNED_FILES:
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    outside = tmp_path / "outside.md"
    outside.write_text(note("outside"))
    d = root / "memories" / "d"
    os.symlink(outside, d / "link.md")
    os.symlink(root / "memories", d / "loop")
    (root / "notes" / "inner.md").write_text(note("inner"))
    os.symlink("../../notes/inner.md", d / "inner.md")
    os.symlink("../..", d / "root")
    os.symlink("..", d / "up")
    os.symlink("self.md", d / "self.md")
    os.mkfifo(d / "fifo.md")
    (d / "new\nline.md").write_text(note("newline"))
    with open(os.path.join(os.fsencode(d), b"caf\xe9.md"), "wb") as handle:
        handle.write(note("cafe").encode())
    return root


@pytest.fixture
def small_palace(tmp_path) -> Path:
    """A tiny palace of three notes in two domains, built through the core API."""
    from palace_cli.editing.authoring import add_memory, init_palace
    from palace_cli.palace import Palace

    root = init_palace(tmp_path / "small", name="Small")
    p = Palace(root)
    add_memory(p, "Two-Phase Commit", "distributed", anchor="frozen wedding statues",
               image="You officiate as forty-seven granite couples freeze mid-vow, waiting for a coordinator's nod.",
               content="A coordinator asks every participant to prepare; only if all vote yes does it commit.",
               keywords=["2pc", "atomic commit"], links=["saga"])
    add_memory(p, "Saga", "distributed", anchor="relay race of apologies",
               image="Runners pass a baton of apology letters; each who stumbles runs back handing out lemon cakes.",
               content="A long transaction split into local steps, each with a compensating action on failure.",
               keywords=["saga", "compensation"], links=["two-phase-commit"])
    add_memory(p, "Bloom Filter", "storage", anchor="hotel of lightbulbs",
               image="A hotel facade of nine hundred lightbulbs flickers as three porters flip switches per guest.",
               content="A bit array with k hash functions: no false negatives, tunable false positives.",
               keywords=["probabilistic", "membership"])
    return root


from conftest_models import embedder_file, installed_models, real_embedder, real_generator, with_models  # noqa: E402,F401
